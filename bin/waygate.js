#!/usr/bin/env node
// The `waygate` command: runs the compiled CLI (built by `npm ci` through the prepare script).
import '../dist/cli/index.js';
