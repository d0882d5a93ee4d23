// Splitting a command line into its arguments the way a POSIX shell splits
// words, and nothing more: quotes and backslashes are honoured, but nothing
// is expanded ($VAR, *, ~) and |, >, ; and && are ordinary characters. The
// result is the argv the workload runs, never passed through a shell.
//
//   'single quotes'  keep everything literally;
//   "double quotes"  keep everything but \" \\ \$ \` and backslash-newline;
//   \x               outside quotes is x (backslash-newline joins lines).

export class ArgvError extends Error {}

export function splitArgs(s) {
  const args = [];
  let cur = '';
  let inWord = false;
  let i = 0;
  while (i < s.length) {
    const c = s[i];
    if (c === "'") {
      const end = s.indexOf("'", i + 1);
      if (end < 0) throw new ArgvError('a single quote is not closed');
      cur += s.slice(i + 1, end);
      inWord = true;
      i = end + 1;
    } else if (c === '"') {
      i++;
      let closed = false;
      while (i < s.length) {
        const d = s[i];
        if (d === '"') {
          closed = true;
          i++;
          break;
        }
        if (d === '\\' && i + 1 < s.length && '"\\$`\n'.includes(s[i + 1])) {
          if (s[i + 1] !== '\n') cur += s[i + 1];
          i += 2;
          continue;
        }
        cur += d;
        i++;
      }
      if (!closed) throw new ArgvError('a double quote is not closed');
      inWord = true;
    } else if (c === '\\') {
      if (i + 1 >= s.length) throw new ArgvError('the line ends with a lone backslash');
      if (s[i + 1] !== '\n') {
        cur += s[i + 1];
        inWord = true;
      }
      i += 2;
    } else if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
      if (inWord) args.push(cur);
      cur = '';
      inWord = false;
      i++;
    } else {
      cur += c;
      inWord = true;
      i++;
    }
  }
  if (inWord) args.push(cur);
  return args;
}

// linesArgs takes one argument per line, as typed (a trailing empty line
// is dropped; a "\r" before a newline too).
export function linesArgs(s) {
  const lines = s.replace(/\r\n/g, '\n').split('\n');
  while (lines.length && lines[lines.length - 1] === '') lines.pop();
  return lines;
}

// SHELL_CHARS are characters that do something in a shell and nothing
// here: a hint is shown when an argument holds one.
export const SHELL_CHARS = /[|&;<>]|\$\(|`/;
