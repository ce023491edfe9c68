#!/usr/bin/env node
// `svc-server` from anywhere: runs programs/svc-server.ts on the Node this checkout pins (see launch.cjs).
require('./launch.cjs')('svc-server.ts');
