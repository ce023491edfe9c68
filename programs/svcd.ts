#!/usr/bin/env node
import { main } from '../sidecar/main.ts';

await main(process.argv.slice(2));
