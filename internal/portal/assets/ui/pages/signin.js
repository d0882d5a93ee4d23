import { api, setToken } from '../api.js';
import { h, replace } from '../dom.js';

export function render(main, { next }, ctx) {
  const input = h('input', {
    id: 'token', name: 'token', type: 'password', autocomplete: 'off', spellcheck: 'false', required: true,
    'aria-describedby': 'token-help token-error',
  });
  const err = h('p', { id: 'token-error', class: 'field-error', role: 'alert' });
  const button = h('button', { type: 'submit', class: 'primary' }, 'Sign in');
  const form = h('form', { class: 'signin card', novalidate: true },
    h('h1', {}, 'Sign in to gpufleet'),
    h('label', { for: 'token' }, 'API token'),
    input,
    h('p', { id: 'token-help', class: 'help' },
      'Paste the token an admin gave you, or the admin token the server wrote to DATA_DIR/admin-token. ',
      'It stays in this browser tab only (sessionStorage) and is sent to this server\'s API, nowhere else.'),
    err,
    button);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const tok = input.value.trim();
    err.textContent = '';
    input.removeAttribute('aria-invalid');
    if (!tok) {
      err.textContent = 'Enter a token.';
      input.setAttribute('aria-invalid', 'true');
      input.focus();
      return;
    }
    button.disabled = true;
    try {
      const me = await api('/whoami', { tokenOverride: tok });
      setToken(tok);
      ctx.signedIn(me);
      ctx.go(next && next !== '#/signin' ? next : '#/');
    } catch (e) {
      err.textContent = e.status === 401 ? 'This token is not valid (unknown, revoked or expired).' : 'Cannot sign in: ' + e.message;
      input.setAttribute('aria-invalid', 'true');
      input.focus();
    } finally {
      button.disabled = false;
    }
  });
  replace(main, form);
  input.focus();
  return null;
}
