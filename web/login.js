// Login: a bearer token, checked with GET /v1/whoami before it is kept.
import { api, ApiError, session } from './api.js';
import { h, replace, notice } from './dom.js';

export function mount(root, { message, onLogin }) {
    const input = h('input', {
        id: 'token', name: 'token', type: 'password', required: true,
        autocomplete: 'off', spellcheck: 'false', autocapitalize: 'off',
        'aria-describedby': 'token-help', 'data-testid': 'token',
    });
    const button = h('button', { type: 'submit', class: 'primary', 'data-testid': 'login' }, 'Log in');
    const status = h('div', { class: 'login-status' });
    if (message) replace(status, notice('error', message, 'login-error'));

    const form = h('form', { class: 'login card', novalidate: true },
        h('h1', {}, 'Log in to gantry'),
        h('label', { for: 'token' }, 'API token'),
        input,
        h('p', { id: 'token-help', class: 'help' },
            'Kept for this browser tab only (session storage); closing the tab forgets it.'),
        status,
        h('div', { class: 'actions' }, button));

    form.addEventListener('submit', async (ev) => {
        ev.preventDefault();
        const token = input.value.trim();
        if (!token) {
            replace(status, notice('error', 'Enter a token.', 'login-error'));
            input.setAttribute('aria-invalid', 'true');
            input.focus();
            return;
        }
        button.disabled = true;
        replace(status, notice('loading', 'Checking the token…'));
        try {
            const who = await api('/v1/whoami', { token });
            onLogin(token, who);
        } catch (e) {
            let text;
            if (e instanceof ApiError && e.status === 401) text = 'This token was not accepted (401). Check it and try again.';
            else if (e instanceof ApiError) text = `Login failed: ${e.describe()}`;
            else text = `Login failed: ${e.message}`;
            replace(status, notice('error', text, 'login-error'));
            input.setAttribute('aria-invalid', 'true');
            button.disabled = false;
            input.select();
        }
    });

    replace(root, form);
    input.focus();
}

// A link that logs in: http://HOST:8080/#token=gty_...[&to=/jobs/j_...].  A fragment is never sent to the
// server (nor in a Referer).  The token is kept as the login form keeps it (this tab's session storage;
// app.js checks it with /v1/whoami as a saved one) and removed from the address bar and from this history
// entry at once, before any page is drawn; `to` (a dashboard route) is where the page goes.  Whoever has
// the link has the token: README.md, "The dashboard from a link", says which tokens to share this way.
export function tokenFromLink() {
    if (!location.hash.startsWith('#token=')) return false;
    const decode = (text) => { try { return decodeURIComponent(text); } catch { return ''; } };
    const fields = {};
    for (const part of location.hash.slice(1).split('&')) {
        const eq = part.indexOf('=');
        if (eq > 0) fields[part.slice(0, eq)] = decode(part.slice(eq + 1));
    }
    const token = (fields.token || '').trim(), route = fields.to || '';
    history.replaceState(null, '', `${location.pathname}${location.search}#${route.startsWith('/') ? route : '/jobs'}`);
    if (token) session.set(token);
    return Boolean(token);
}
