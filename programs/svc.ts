#!/usr/bin/env node
process.stderr.write('svc: not yet implemented\n');
process.exit(1);
