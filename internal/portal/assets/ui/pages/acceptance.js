import { api, apiText } from '../api.js';
import { h, replace, ago, rfc3339, errorBox, table, wid } from '../dom.js';

// The Acceptance pages (issue 18): #/acceptance lists the acceptance runs
// of the user's teams (GET /api/v1/acceptance/runs, newest first), and
// #/acceptance/ID shows one run (GET /api/v1/acceptance/runs/ID): its
// stages, each criterion with its value and verdict, the metrics, the
// report, and the review's decisions (the latest, and every one kept).
// The words are the CLI's and the API's: statuses Passed, Failed, Running
// and Error, verdicts pass and fail, decisions extend, reserve, dedicate,
// scale and reject.

// REFRESH_MS is how often a page reads again while a run is Running.
const REFRESH_MS = 2000;

const DECISIONS = ['extend', 'reserve', 'dedicate', 'scale', 'reject'];

// status is a badge for a run's or a stage's status (Passed, Failed,
// Running, Error, Pending, Skipped).
function status(s) {
  const cls = { Passed: 'ok', Failed: 'bad', Error: 'bad', Running: 'info', Pending: 'warn', Skipped: '' }[s];
  return h('span', { class: ('badge status ' + (cls || '')).trim(), 'data-status': s || '' }, s || 'unknown');
}

function verdict(v) {
  return h('span', { class: 'badge verdict ' + (v === 'pass' ? 'ok' : 'bad'), 'data-verdict': v }, v);
}

// num writes a metric's value as the report does: up to 6 significant
// digits, no exponent for everyday figures.
function num(v) {
  if (v === null || v === undefined) return h('span', { class: 'muted' }, 'not reported');
  return String(Number.isInteger(v) ? v : Number(v.toPrecision(6)));
}

export function render(main, { parts }, ctx) {
  return parts.length > 1 ? renderRun(main, parts[1], ctx) : renderList(main);
}

// poller calls f now and again every REFRESH_MS for as long as f answers
// true (a run is Running), until stopped.
function poller(f) {
  let stopped = false;
  let timer = 0;
  const tick = async () => {
    let again = false;
    try {
      again = await f();
    } finally {
      if (!stopped && again) timer = setTimeout(tick, REFRESH_MS);
    }
  };
  tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

function renderList(main) {
  const box = h('div', { id: 'acceptance-runs' }, h('p', { class: 'muted' }, 'Loading…'));
  const errBox = h('div', {});
  const updated = h('p', { class: 'help updated', 'aria-live': 'polite' });
  replace(main,
    h('div', { class: 'page-head' }, h('h1', { id: 'acceptance' }, 'Acceptance runs'), updated),
    h('p', { class: 'help' }, 'Each run of an acceptance card proves a workload on real capacity: its stages run in order and each criterion is judged on the stage\'s metrics. Start one with ',
      h('code', {}, 'gpufleet accept run card.yaml'), '; ', h('code', {}, 'gpufleet accept list'), ' reads the same list.'),
    errBox, box);
  const ac = new AbortController();
  const stop = poller(async () => {
    let out;
    try {
      out = await api('/acceptance/runs', { signal: ac.signal });
    } catch (e) {
      if (e.name !== 'AbortError') replace(errBox, errorBox(e, 'Cannot read the acceptance runs'));
      return false;
    }
    replace(errBox);
    const runs = out.items || [];
    replace(box, table('Acceptance runs', ['ID', 'Card', 'Team', 'Status', 'Decision', 'Age'], runs.map((r) => ({
      attrs: { 'data-id': r.id, 'data-status': r.status },
      cells: [
        h('a', { href: '#/acceptance/' + encodeURIComponent(r.id), class: 'run-link' }, wid(r.id)),
        r.card ? r.card.name : '',
        r.team,
        status(r.status),
        r.decision ? h('span', { class: 'decision' }, r.decision.decision) : h('span', { class: 'muted' }, '—'),
        ago(r.startedAt),
      ],
    })), { empty: 'No acceptance runs yet. Run a card with gpufleet accept run card.yaml.', cls: 'runs' }));
    const running = runs.some((r) => r.status === 'Running');
    const t = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    updated.replaceChildren('Updated ', h('time', { datetime: t, title: t }, t), running ? ' · refreshes every 2 s while a run is Running' : '');
    return running;
  });
  return () => {
    stop();
    ac.abort();
  };
}

// canDecide reports whether the user may record a decision on a run of
// team: an admin, or a team-admin of the team.
function canDecide(me, team) {
  if (!me) return false;
  if (me.admin) return true;
  return (me.memberships || []).some((m) => m.team === team && m.role === 'team-admin');
}

function renderRun(main, id, ctx) {
  const path = '/acceptance/runs/' + encodeURIComponent(id);
  const head = h('div', { id: 'run-head' }, h('p', { class: 'muted' }, 'Loading…'));
  const errBox = h('div', {});
  const stagesBox = h('div', { id: 'run-stages' });
  const decisionBox = h('div', { id: 'run-decision' });
  const reportErr = h('div', { id: 'report-error' });
  // The report is the server's own HTML page: shown in a frame with
  // sandbox="" (no script, an opaque origin: it can reach neither the
  // portal nor its token), never put into the portal's page.
  const frame = h('iframe', { id: 'run-report', class: 'report-frame', title: 'Acceptance report of ' + id, sandbox: '', referrerpolicy: 'no-referrer' });
  const title = h('h1', { id: 'acceptance-run' }, 'Acceptance run ', id);
  replace(main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/acceptance' }, 'Acceptance runs'), ' / ', id),
    h('div', { class: 'title-row' }, title),
    errBox, head, decisionBox,
    h('h2', {}, 'Stages'), stagesBox,
    h('section', { class: 'card', 'aria-labelledby': 'report-h' },
      h('div', { class: 'section-head' }, h('h2', { id: 'report-h' }, 'Report'),
        h('p', { class: 'help' }, 'The page ', h('code', {}, 'gpufleet accept report ' + id), ' writes, with the evidence of the nodes used and the readiness checklist.')),
      reportErr, frame));

  const ac = new AbortController();
  let seen = '';
  let run = null;
  const load = async () => {
    let r;
    try {
      r = await api(path, { signal: ac.signal });
    } catch (e) {
      if (e.name !== 'AbortError') replace(errBox, errorBox(e, 'Cannot read acceptance run ' + id));
      return e.status !== 404 && e.status !== 403 && e.name !== 'AbortError';
    }
    replace(errBox);
    const text = JSON.stringify(r);
    if (text !== seen) {
      seen = text;
      run = r;
      show();
      loadReport();
    }
    return r.status === 'Running';
  };
  const loadReport = async () => {
    try {
      const html = await apiText(path + '/report', { signal: ac.signal });
      frame.srcdoc = html;
      replace(reportErr);
    } catch (e) {
      if (e.name !== 'AbortError') replace(reportErr, errorBox(e, 'Cannot read the report'));
    }
  };

  const show = () => {
    title.replaceChildren('Acceptance run ', run.id, ' ', status(run.status));
    replace(head, h('dl', { class: 'props' },
      h('dt', {}, 'Card'), h('dd', { id: 'run-card' }, run.card ? run.card.name : ''),
      h('dt', {}, 'Team'), h('dd', {}, run.team),
      h('dt', {}, 'Status'), h('dd', { id: 'run-status' }, status(run.status)),
      run.card && run.card.target && (run.card.target.pool || run.card.target.gpuModel)
        ? [h('dt', {}, 'Target'), h('dd', {}, [run.card.target.pool ? 'pool ' + run.card.target.pool : '', run.card.target.gpuModel || ''].filter(Boolean).join(', '))] : null,
      h('dt', {}, 'Started'), h('dd', {}, rfc3339(run.startedAt)),
      h('dt', {}, 'Finished'), h('dd', {}, run.finishedAt ? rfc3339(run.finishedAt) : h('span', { class: 'muted' }, run.status === 'Running' ? 'still running (refreshes every 2 s)' : '—'))),
    run.message ? h('p', { id: 'run-message', class: run.status === 'Passed' ? 'help' : 'error' }, run.message) : null);
    replace(stagesBox, (run.stages || []).map(stage));
    showDecision();
  };

  const stage = (s) => h('section', { class: 'card stage', 'data-stage': s.name, 'aria-labelledby': 'stage-' + s.name },
    h('div', { class: 'section-head' },
      h('h3', { id: 'stage-' + s.name }, s.name, ' ', h('span', { class: 'muted' }, '(' + s.type + ')'), ' ', status(s.status)),
      s.startedAt ? h('p', { class: 'help' }, 'Started ', rfc3339(s.startedAt), s.finishedAt ? [', finished ', rfc3339(s.finishedAt)] : null) : null),
    s.message ? h('p', { class: s.status === 'Failed' ? 'error stage-message' : 'help stage-message' }, s.message) : null,
    (s.workloads || []).length ? h('p', { class: 'help' }, 'Workloads: ', s.workloads.map((w, i) => [i ? ', ' : '', h('a', { href: '#/workloads/' + encodeURIComponent(w) }, wid(w))])) : null,
    (s.criteria || []).length ? table('Criteria of stage ' + s.name, ['Criterion', 'Value', 'Verdict', 'Why'], s.criteria.map((c) => ({
      attrs: { class: c.verdict === 'pass' ? 'criterion' : 'criterion failing', 'data-expression': c.expression, 'data-verdict': c.verdict },
      cells: [h('code', { class: 'expr' }, c.expression), h('span', { class: 'value' }, num(c.value)), verdict(c.verdict), h('span', { class: 'reason' }, c.reason || '')],
    })), { cls: 'criteria' }) : h('p', { class: 'muted empty' }, 'No criteria.'),
    (s.metrics || []).length ? h('details', { class: 'metrics', open: true },
      h('summary', {}, 'Metrics (' + s.metrics.length + ')'),
      table('Metrics of stage ' + s.name, ['Metric', 'Value', 'Unit', 'Source'], s.metrics.map((m) => ({
        attrs: { 'data-metric': m.name, 'data-source': m.source },
        cells: [h('code', {}, m.name), num(m.value), h('span', { class: 'unit' }, m.unit || ''), m.source],
      })), { cls: 'metrics' })) : null);

  const showDecision = () => {
    const d = run.decision;
    const said = (x) => [h('strong', { class: 'decision' }, x.decision), x.override ? [' ', h('span', { class: 'override' }, '(override)')] : null,
      ' by ', x.by || '?', ' ', rfc3339(x.at), x.note ? [': ', h('span', { class: 'note' }, x.note)] : null];
    const history = run.decisions || [];
    const recorded = [d ? h('p', { id: 'decision-recorded' }, 'Decision: ', said(d)) : h('p', { class: 'muted', id: 'decision-recorded' }, 'No decision recorded.'),
      history.length > 1 ? h('details', { id: 'decision-history' }, h('summary', {}, 'Every decision (' + history.length + ', oldest first)'),
        h('ol', {}, history.map((x) => h('li', { class: 'decision-entry' }, said(x))))) : null];
    if (run.status === 'Running' || !canDecide(ctx.me, run.team)) {
      replace(decisionBox, h('section', { class: 'card', 'aria-labelledby': 'decision-h' }, h('h2', { id: 'decision-h' }, 'Decision'), recorded,
        run.status === 'Running' ? h('p', { class: 'help' }, 'A decision is recorded once the run has ended.')
          : h('p', { class: 'help' }, 'A team-admin of ', run.team, ' records the decision.')));
      return;
    }
    const sel = h('select', { id: 'a-decision', name: 'decision', 'aria-describedby': 'a-decision-error' },
      DECISIONS.map((x) => h('option', { value: x, selected: d ? d.decision === x : x === 'extend' }, x)));
    const note = h('textarea', { id: 'a-note', name: 'note', rows: 2, maxlength: 4096, placeholder: 'why (optional)' });
    const err = h('div', { id: 'a-decision-error', class: 'decision-error', role: 'alert' });
    // extend, reserve, dedicate and scale on a run that did not pass are
    // recorded only as an override, with a note (the API refuses them
    // otherwise).
    const override = h('input', { type: 'checkbox', id: 'a-override', name: 'override' });
    const button = h('button', { type: 'submit', class: 'primary' }, d ? 'Record another decision' : 'Record the decision');
    const form = h('form', { id: 'decision-form', 'aria-label': 'Record a decision' },
      h('div', { class: 'form-grid' },
        h('div', { class: 'field' }, h('label', { for: 'a-decision' }, 'Decision'), sel),
        h('div', { class: 'field note-field' }, h('label', { for: 'a-note' }, 'Note'), note,
          run.status !== 'Passed' ? h('label', { class: 'override-choice' }, override, ' Override: record it though the run did not pass (needs a note)') : null),
        h('div', { class: 'field' }, button)),
      err);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      button.disabled = true;
      replace(err);
      try {
        run = await api(path + '/decision', { method: 'POST', body: { decision: sel.value, note: note.value, override: override.checked } });
        seen = JSON.stringify(run);
        show();
        loadReport();
      } catch (e) {
        replace(err, h('div', { class: 'error' }, 'The decision was not recorded: ' + e.message + (e.status ? ' (HTTP ' + e.status + ')' : ''),
          e.fields.length ? h('ul', {}, e.fields.map((f) => h('li', {}, h('code', {}, f.field), ': ', f.problem))) : null));
      } finally {
        button.disabled = false;
      }
    });
    replace(decisionBox, h('section', { class: 'card', 'aria-labelledby': 'decision-h' }, h('h2', { id: 'decision-h' }, 'Decision'), recorded,
      h('p', { class: 'help' }, 'The review\'s decision on this capacity, as ', h('code', {}, 'gpufleet accept decide ' + run.id + ' --decision reserve --note …'), ' records it; each decision is kept.'),
      form));
  };

  const stop = poller(load);
  return () => {
    stop();
    ac.abort();
  };
}
