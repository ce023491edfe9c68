#!/usr/bin/env node
// `svcd` from anywhere: runs programs/svcd.ts on the Node this checkout pins (see launch.cjs).
require('./launch.cjs')('svcd.ts');
