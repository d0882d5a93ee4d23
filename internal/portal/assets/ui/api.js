// The REST API, with the Bearer token the user signed in with. The token
// lives in this tab's sessionStorage only: it is gone when the tab closes,
// and other tabs and origins never see it.

const KEY = 'gpufleet.token';

export function token() {
  return sessionStorage.getItem(KEY) || '';
}

export function setToken(t) {
  if (t) sessionStorage.setItem(KEY, t);
  else sessionStorage.removeItem(KEY);
}

// ApiError is an answer other than 2xx: status, the API's error code and
// message, and the fields it names ({field, problem}).
export class ApiError extends Error {
  constructor(status, err) {
    super(err.message || `HTTP ${status}`);
    this.status = status;
    this.code = err.code || '';
    this.fields = Array.isArray(err.fields) ? err.fields : [];
  }
}

// onUnauthenticated is called when the API answers 401: the token is gone,
// revoked or expired.
let unauthenticated = () => {};
export function onUnauthenticated(f) {
  unauthenticated = f;
}

function headers(extra) {
  return Object.assign({ Authorization: 'Bearer ' + token() }, extra);
}

// api calls /api/v1 + path and returns the decoded JSON body (null for 204).
export async function api(path, { method = 'GET', body, signal, tokenOverride } = {}) {
  const h = headers({ Accept: 'application/json' });
  if (tokenOverride !== undefined) h.Authorization = 'Bearer ' + tokenOverride;
  const init = { method, headers: h, signal, cache: 'no-store', credentials: 'omit' };
  if (body !== undefined) {
    h['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let r;
  try {
    r = await fetch('/api/v1' + path, init);
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, { code: 'network', message: 'the server cannot be reached (' + e.message + ')' });
  }
  if (r.status === 204) return null;
  const text = await r.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!r.ok) {
    const err = (data && data.error) || { message: text.trim() || r.statusText };
    const e = new ApiError(r.status, err);
    if (r.status === 401 && tokenOverride === undefined) unauthenticated(e);
    throw e;
  }
  return data;
}

// apiText calls /api/v1 + path and returns the body as text (an HTML
// report), with the same token and the same errors as api.
export async function apiText(path, { signal } = {}) {
  let r;
  try {
    r = await fetch('/api/v1' + path, { headers: headers({ Accept: 'text/html' }), signal, cache: 'no-store', credentials: 'omit' });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, { code: 'network', message: 'the server cannot be reached (' + e.message + ')' });
  }
  const text = await r.text();
  if (!r.ok) {
    let err = { message: text.trim() || r.statusText };
    try {
      err = JSON.parse(text).error || err;
    } catch { /* not JSON */ }
    const e = new ApiError(r.status, err);
    if (r.status === 401) unauthenticated(e);
    throw e;
  }
  return text;
}

// list reads every page of a list, at most max items.
export async function list(path, { signal, max = 5000 } = {}) {
  const sep = path.includes('?') ? '&' : '?';
  let items = [];
  let page = '';
  for (;;) {
    const out = await api(path + (page ? sep + 'pageToken=' + encodeURIComponent(page) : ''), { signal });
    items = items.concat(out.items || []);
    page = out.nextPageToken || '';
    if (!page || items.length >= max) return { items, more: !!page };
  }
}

// LOG_TAIL_BYTES is how much of a log the page reads before following it.
export const LOG_TAIL_BYTES = 1 << 20;

// streamLogs follows a workload's log from its last LOG_TAIL_BYTES bytes,
// calling onText with each chunk as it arrives, until the workload has
// finished (the server then ends the answer) or signal aborts.
export async function streamLogs(id, onText, signal) {
  let r;
  try {
    r = await fetch('/api/v1/workloads/' + encodeURIComponent(id) + '/logs?follow=true&limitBytes=' + LOG_TAIL_BYTES, {
      headers: headers({ Accept: 'text/plain' }), signal, cache: 'no-store', credentials: 'omit',
    });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, { code: 'network', message: 'the server cannot be reached (' + e.message + ')' });
  }
  if (!r.ok) {
    let err = { message: r.statusText };
    try {
      err = (await r.json()).error || err;
    } catch { /* not JSON */ }
    const e = new ApiError(r.status, err);
    if (r.status === 401) unauthenticated(e);
    throw e;
  }
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    onText(value);
  }
}
