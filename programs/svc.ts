#!/usr/bin/env node
// svc, the command-line client (spec "Command-line client"); everything lives in cli/.
import { main } from '../cli/main.ts';

process.exitCode = await main(process.argv.slice(2));
