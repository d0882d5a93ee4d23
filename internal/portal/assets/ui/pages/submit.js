import { api, ApiError } from '../api.js';
import { h, replace, errorBox } from '../dom.js';
import { splitArgs, linesArgs, ArgvError, SHELL_CHARS } from '../argv.js';

// Which input shows the API's error for a field it names.
function fieldFor(name) {
  if (name === 'team') return 'team';
  if (name === 'kind') return 'kind';
  if (name === 'name') return 'name';
  if (name === 'priority') return 'priority';
  if (name === 'image') return 'image';
  if (name === 'command' || name.startsWith('command[')) return 'command';
  if (name === 'resources.gpus' || name === 'replicas') return 'gpus';
  if (name === 'resources.gpuMemoryMiB') return 'gpumem';
  if (name === 'env' || name.startsWith('env.')) return 'env';
  if (name === 'maxRuntimeSeconds') return 'maxruntime';
  return null;
}

export function render(main, _route, ctx) {
  const errs = {};
  const field = (id, label, control, help) => {
    errs[id] = h('p', { class: 'field-error', id: id + '-error' });
    control.setAttribute('aria-describedby', (help ? id + '-help ' : '') + id + '-error');
    return h('div', { class: 'field', id: 'field-' + id },
      h('label', { for: id }, label), control,
      help ? h('p', { class: 'help', id: id + '-help' }, help) : null,
      errs[id]);
  };

  const team = h('select', { id: 'team', name: 'team' });
  const kind = h('select', { id: 'kind', name: 'kind' },
    h('option', { value: 'job' }, 'job: runs to completion'),
    h('option', { value: 'service' }, 'service: runs until stopped'),
    h('option', { value: 'notebook' }, 'notebook: interactive, reclaimed when idle'));
  const name = h('input', { id: 'name', name: 'name', type: 'text', autocomplete: 'off', placeholder: 'optional: from the program\'s name' });
  const cmdMode = 'shell';
  const command = h('textarea', { id: 'command', name: 'command', rows: 3, spellcheck: 'false', autocomplete: 'off',
    placeholder: 'python train.py --epochs 3' });
  const modeShell = h('input', { type: 'radio', name: 'cmdmode', id: 'cmdmode-shell', value: 'shell', checked: cmdMode === 'shell' });
  const modeLines = h('input', { type: 'radio', name: 'cmdmode', id: 'cmdmode-lines', value: 'lines' });
  const preview = h('div', { class: 'argv-preview', id: 'argv-preview', 'aria-live': 'polite' });
  const image = h('input', { id: 'image', name: 'image', type: 'text', autocomplete: 'off', placeholder: 'optional, e.g. pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime' });
  const gpuMode = { count: h('input', { type: 'radio', name: 'gpumode', id: 'gpumode-count', value: 'count', checked: true }),
    memory: h('input', { type: 'radio', name: 'gpumode', id: 'gpumode-memory', value: 'memory' }) };
  const gpusIn = h('input', { id: 'gpus', name: 'gpus', type: 'text', inputmode: 'decimal', value: '1', autocomplete: 'off' });
  const gpumem = h('input', { id: 'gpumem', name: 'gpumem', type: 'text', autocomplete: 'off', placeholder: '20GiB or 512MiB', disabled: true });
  const priority = h('select', { id: 'priority', name: 'priority' }, h('option', { value: '' }, 'the default for its kind'));
  const env = h('textarea', { id: 'env', name: 'env', rows: 2, spellcheck: 'false', autocomplete: 'off', placeholder: 'NAME=value, one a line' });
  const maxruntime = h('input', { id: 'maxruntime', name: 'maxruntime', type: 'text', autocomplete: 'off', placeholder: 'e.g. 2h or 30m; empty for none' });
  const summary = h('div', { id: 'form-errors', role: 'alert' });
  const button = h('button', { type: 'submit', class: 'primary', id: 'submit' }, 'Submit');

  const syncGPUMode = () => {
    const mem = gpuMode.memory.checked;
    gpusIn.disabled = mem;
    gpumem.disabled = !mem;
  };
  gpuMode.count.addEventListener('change', syncGPUMode);
  gpuMode.memory.addEventListener('change', syncGPUMode);

  const parseCommand = () => (modeLines.checked ? linesArgs(command.value) : splitArgs(command.value));
  const showPreview = () => {
    try {
      const argv = parseCommand();
      if (!argv.length) {
        replace(preview, h('span', { class: 'muted' }, 'No arguments yet.'));
        return;
      }
      replace(preview, h('span', { class: 'muted' }, `Runs as ${argv.length} argument${argv.length > 1 ? 's' : ''}, without a shell: `),
        h('ol', { class: 'argv' }, argv.map((a) => h('li', {}, h('code', {}, a)))),
        argv.some((a) => SHELL_CHARS.test(a)) && !['sh', 'bash', '/bin/sh', '/bin/bash'].includes(argv[0])
          ? h('p', { class: 'help warn-text' }, 'Pipes, redirections and ; are plain characters here. To use them, run a shell: sh -c \'…\'.') : null);
    } catch (e) {
      replace(preview, h('span', { class: 'field-error' }, e.message));
    }
  };
  command.addEventListener('input', showPreview);
  modeShell.addEventListener('change', showPreview);
  modeLines.addEventListener('change', showPreview);

  const form = h('form', { id: 'submit-form', class: 'card form', novalidate: true },
    summary,
    h('div', { class: 'form-grid' },
      field('team', 'Team', team),
      field('kind', 'Kind', kind),
      field('name', 'Name', name, 'Lowercase letters, digits and -.'),
      field('priority', 'Priority', priority)),
    h('fieldset', { class: 'field wide' },
      h('legend', {}, 'Command'),
      h('div', { class: 'radios' },
        h('span', {}, modeShell, h('label', { for: 'cmdmode-shell' }, 'Words, quoted as in a shell')),
        h('span', {}, modeLines, h('label', { for: 'cmdmode-lines' }, 'One argument per line'))),
      h('label', { for: 'command', class: 'sr-only' }, 'Command'),
      command,
      h('p', { class: 'help', id: 'command-help' }, 'It never runs through a shell: quotes group words, nothing is expanded. ',
        'Example: sh -c \'echo hello; sleep 60\'.'),
      preview,
      errs.command = h('p', { class: 'field-error', id: 'command-error' })),
    field('image', 'Container image', image, 'Used by the Kubernetes executor; the local executor runs the command on the host. Leave empty for the default.'),
    h('fieldset', { class: 'field wide' },
      h('legend', {}, 'GPUs'),
      h('div', { class: 'gpu-choice' },
        h('div', {},
          h('span', {}, gpuMode.count, h('label', { for: 'gpumode-count' }, 'A count or a fraction of one GPU')),
          h('label', { for: 'gpus', class: 'sr-only' }, 'Number of GPUs'),
          gpusIn,
          h('p', { class: 'help', id: 'gpus-help' }, '1, 2, 8 … or 0.5, 0.25 to share one GPU.'),
          errs.gpus = h('p', { class: 'field-error', id: 'gpus-error' })),
        h('div', {},
          h('span', {}, gpuMode.memory, h('label', { for: 'gpumode-memory' }, 'GPU memory (a share of one GPU)')),
          h('label', { for: 'gpumem', class: 'sr-only' }, 'GPU memory'),
          gpumem,
          h('p', { class: 'help', id: 'gpumem-help' }, 'In MiB, GiB or TiB (GB means GiB): 20GB, 512MiB.'),
          errs.gpumem = h('p', { class: 'field-error', id: 'gpumem-error' })))),
    h('details', { class: 'field wide' }, h('summary', {}, 'More options'),
      h('div', { class: 'form-grid' },
        field('env', 'Environment', env),
        field('maxruntime', 'Maximum run time', maxruntime, 'Stopped (Failed, MaxRuntimeExceeded) after this long.'))),
    h('div', { class: 'actions' }, button, h('a', { href: '#/workloads' }, 'Back to the workloads')));
  command.setAttribute('aria-describedby', 'command-help command-error');
  gpusIn.setAttribute('aria-describedby', 'gpus-help gpus-error');
  gpumem.setAttribute('aria-describedby', 'gpumem-help gpumem-error');

  replace(main, h('h1', {}, 'Submit a workload'), form);
  showPreview();

  const ac = new AbortController();
  // Teams where the user may submit (member or better); every team for an
  // admin.
  api('/teams', { signal: ac.signal }).then((ts) => {
    const me = ctx.me || {};
    const roles = Object.fromEntries((me.memberships || []).map((m) => [m.team, m.role]));
    const ok = ts.items.filter((t) => me.admin || (roles[t.name] && roles[t.name] !== 'viewer'));
    replace(team, ok.map((t) => h('option', { value: t.name }, t.name)));
    if (!ok.length) team.appendChild(h('option', { value: '' }, 'no team where you may submit'));
  }).catch((e) => replace(summary, errorBox(e, 'Cannot read the teams')));
  api('/priorityclasses', { signal: ac.signal }).then((ps) => {
    for (const p of ps.items) {
      const notes = [p.preemptible ? 'preemptible' : 'never preempted', p.mayBorrow ? 'may borrow' : 'within guarantee only', p.idleOnly ? 'idle capacity only' : null].filter(Boolean);
      priority.appendChild(h('option', { value: p.name }, `${p.name} (${notes.join(', ')})`));
    }
  }).catch(() => {});

  const clearErrors = () => {
    replace(summary);
    for (const [id, el] of Object.entries(errs)) {
      el.textContent = '';
      const input = document.getElementById(id);
      if (input) input.removeAttribute('aria-invalid');
    }
  };
  const setError = (id, msg) => {
    const el = errs[id];
    el.textContent = el.textContent ? el.textContent + ' ' + msg : msg;
    const input = document.getElementById(id);
    if (input) input.setAttribute('aria-invalid', 'true');
  };

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors();
    const local = [];
    const w = { team: team.value || undefined, kind: kind.value, resources: {} };
    if (name.value.trim()) w.name = name.value.trim();
    if (priority.value) w.priority = priority.value;
    if (image.value.trim()) w.image = image.value.trim();
    try {
      w.command = parseCommand();
    } catch (e) {
      if (!(e instanceof ArgvError)) throw e;
      local.push(['command', e.message]);
    }
    if (gpuMode.count.checked) {
      const v = gpusIn.value.trim();
      if (!/^(\d+(\.\d*)?|\.\d+)$/.test(v)) local.push(['gpus', 'must be a number such as 1, 2 or 0.25']);
      // The API takes a quoted decimal exactly as typed (no float rounding).
      else w.resources.gpus = v;
    } else {
      // The CLI's rule (api.ParseMemoryMiB): every unit is a power of 1024
      // however it is spelt, so 20G = 20GB = 20GiB; a bare number is MiB.
      const m = /^\s*(\d+(?:\.\d+)?)\s*(TiB|TB|Ti|T|GiB|GB|Gi|G|MiB|MB|Mi|M)?\s*$/i.exec(gpumem.value);
      if (!m) local.push(['gpumem', 'must be a size such as 20GB, 20GiB or 512MiB (M, MB, Mi, MiB, G, GB, Gi, GiB, T, TB, Ti, TiB)']);
      else {
        const unit = (m[2] || 'MiB').toLowerCase();
        const v = parseFloat(m[1]) * (unit.startsWith('t') ? 1024 * 1024 : unit.startsWith('g') ? 1024 : 1);
        if (!Number.isInteger(v) || v <= 0) local.push(['gpumem', 'must be a positive whole number of MiB']);
        else {
          w.resources.gpus = 0;
          w.resources.gpuMemoryMiB = v;
        }
      }
    }
    const envLines = env.value.split('\n').map((l) => l.trim()).filter(Boolean);
    if (envLines.length) {
      w.env = {};
      for (const l of envLines) {
        const i = l.indexOf('=');
        if (i <= 0) local.push(['env', `"${l}" is not NAME=value`]);
        else w.env[l.slice(0, i)] = l.slice(i + 1);
      }
    }
    if (maxruntime.value.trim()) {
      const s = parseDuration(maxruntime.value.trim());
      if (s === null) local.push(['maxruntime', 'must be a duration such as 90m, 2h or 1h30m']);
      else w.maxRuntimeSeconds = s;
    }
    if (local.length) {
      for (const [id, msg] of local) setError(id, msg);
      replace(summary, h('div', { class: 'error' }, 'Please correct the fields marked below.'));
      document.getElementById(local[0][0]).focus();
      return;
    }
    button.disabled = true;
    button.textContent = 'Submitting…';
    try {
      const out = await api('/workloads', { method: 'POST', body: w, signal: ac.signal });
      ctx.go('#/workloads/' + encodeURIComponent(out.id));
    } catch (e) {
      if (e.name === 'AbortError') return;
      const unplaced = [];
      for (const f of (e instanceof ApiError ? e.fields : [])) {
        const id = fieldFor(f.field);
        if (id) setError(id, (f.field.includes('.') || f.field.includes('[') ? f.field + ': ' : '') + f.problem);
        else unplaced.push(f.field + ': ' + f.problem);
      }
      const head = e.fields && e.fields.length ? 'The server refused the workload; see the fields marked below.' : 'The server refused the workload: ' + e.message;
      replace(summary, h('div', { class: 'error' }, head + (e.status ? ` (HTTP ${e.status})` : ''),
        unplaced.length ? h('ul', {}, unplaced.map((u) => h('li', {}, u))) : null));
      const firstBad = form.querySelector('[aria-invalid="true"]');
      (firstBad || summary).focus?.();
    } finally {
      button.disabled = false;
      button.textContent = 'Submit';
    }
  });
  return () => ac.abort();
}

// parseDuration reads 90m, 2h, 1h30m, 45s into seconds (null if it is not
// one).
function parseDuration(s) {
  if (!/^(\d+\s*[hms]\s*)+$/.test(s)) return null;
  let total = 0;
  for (const m of s.matchAll(/(\d+)\s*([hms])/g)) total += parseInt(m[1], 10) * { h: 3600, m: 60, s: 1 }[m[2]];
  return total > 0 ? total : null;
}
