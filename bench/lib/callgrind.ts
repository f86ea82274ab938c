/**
 * Reads a callgrind dump of a node process run with `--perf-basic-prof`, and says which functions the instructions
 * went to. Callgrind knows no names for JIT code; node's perf map (`/tmp/perf-<pid>.map`: start, size and name of
 * each compiled function) gives them.
 *
 * Two figures per function: its own instructions (`self`), and those of a JavaScript function together with the
 * V8 builtins, runtime and C++ it calls directly but not through another JavaScript function (`withNatives`): a
 * string concatenation, a JSON.stringify or a Map lookup is then charged to the code that asked for it. Calls
 * through V8's call and promise trampolines are left out of `withNatives`, as they lead to other JavaScript.
 */
import fs from 'node:fs';

interface CompiledFunction {
  start: number;
  end: number;
  name: string;
}

export interface FunctionCost {
  name: string;
  self: number;
  withNatives: number;
}

/** The compiled functions of a perf map, by start address. */
export function readPerfMap(file: string): CompiledFunction[] {
  const functions: CompiledFunction[] = [];
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const match = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line);
    if (match) functions.push({ start: parseInt(match[1]!, 16), end: parseInt(match[1]!, 16) + parseInt(match[2]!, 16), name: match[3]! });
  }
  return functions.sort((a, b) => a.start - b.start);
}

function compiledAt(functions: CompiledFunction[], address: number): string | null {
  let low = 0;
  let high = functions.length - 1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    const candidate = functions[middle]!;
    if (address < candidate.start) high = middle - 1;
    else if (address >= candidate.end) low = middle + 1;
    else return candidate.name;
  }
  return null;
}

/** Builtins through which one JavaScript function calls another (or resumes one): not its own work. */
const TRAMPOLINE = /Call|Construct|CompileLazy|Prologue|Apply|Generator|Await|Resolve|Reject|Microtask|Promise|Entry|Invoke|Execution|Bound|Deopt|Api|API|node::|uv_/;

/** Costs per function of one callgrind dump (a single thread's file), most expensive first. */
export function functionCosts(dumpFile: string, functions: CompiledFunction[]): FunctionCost[] {
  const names = new Map<string, string>();
  // Callgrind writes a name once, as `(id) name`, and then only `(id)`.
  const nameOf = (text: string): string => {
    const match = /^\((\d+)\)(?: (.*))?$/.exec(text.trim());
    if (!match) return text.trim();
    if (match[2] !== undefined) names.set(match[1]!, match[2]);
    return names.get(match[1]!) ?? text;
  };
  const readable = (raw: string): string => {
    const address = /^0x([0-9a-f]+)$/.exec(raw);
    if (!address) return raw;
    // One entry per function whatever its tier (`*` optimised, `^` baseline, `~` interpreted).
    const name = compiledAt(functions, parseInt(address[1]!, 16))?.replace(/^JS:[*^~+]/, 'JS:');
    return name ? `JIT ${name}` : 'JIT (unnamed)';
  };
  const costs = new Map<string, FunctionCost>();
  const costOf = (name: string) => {
    let cost = costs.get(name);
    if (!cost) costs.set(name, (cost = { name, self: 0, withNatives: 0 }));
    return cost;
  };
  let current: FunctionCost | null = null;
  let callee: string | null = null;
  let inCall = false;
  for (const line of fs.readFileSync(dumpFile, 'utf8').split('\n')) {
    if (line.startsWith('fn=')) {
      current = costOf(readable(nameOf(line.slice(3))));
      inCall = false;
    } else if (line.startsWith('cfn=')) {
      callee = readable(nameOf(line.slice(4)));
    } else if (line.startsWith('calls=')) {
      inCall = true;
    } else if (current && /^[0-9+\-*]/.test(line)) {
      const cost = Number(line.split(' ')[1] ?? 0);
      const isJavaScript = current.name.startsWith('JIT JS:');
      if (inCall) {
        if (isJavaScript && callee && !callee.startsWith('JIT') && !TRAMPOLINE.test(callee)) current.withNatives += cost;
      } else {
        current.self += cost;
        current.withNatives += cost;
      }
      inCall = false;
    }
  }
  return [...costs.values()].sort((a, b) => b.withNatives - a.withNatives);
}
