#!/usr/bin/env node
process.stderr.write('svcd: not yet implemented\n');
process.exit(1);
