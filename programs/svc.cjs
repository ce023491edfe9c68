#!/usr/bin/env node
// `svc` from anywhere: runs programs/svc.ts on the Node this checkout pins (see launch.cjs).
require('./launch.cjs')('svc.ts');
