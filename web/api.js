// REST client for /v1. The bearer token lives in sessionStorage only (this
// tab; gone when the tab closes), never in localStorage or cookies.

const TOKEN_KEY = 'gantry.token';

export const session = {
    token() {
        try { return sessionStorage.getItem(TOKEN_KEY); } catch { return null; }
    },
    set(token) { sessionStorage.setItem(TOKEN_KEY, token); },
    clear() {
        try { sessionStorage.removeItem(TOKEN_KEY); } catch { /* storage disabled */ }
    },
};

// An API failure. status 0 means no HTTP answer at all (network, aborted).
export class ApiError extends Error {
    constructor(status, code, message, field) {
        super(message);
        this.name = 'ApiError';
        this.status = status;
        this.code = code || '';
        this.field = field || '';
    }
    // One line for the user, e.g. "404 not_found: job not found".
    describe() {
        if (this.status === 0) return this.message;
        const code = this.code ? ` ${this.code}` : '';
        return `${this.status}${code}: ${this.message}`;
    }
}

// Called when a request made with the session token gets 401 (token revoked
// or expired): the app logs out. Set by app.js.
let onUnauthorized = () => {};
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

// Server clock offset in ms, learnt from the Date header, so ages such as
// "heartbeat 3 s ago" are not skewed by the browser's clock. The header has
// one-second resolution, so offsets under 2 s are ignored.
let clockOffset = 0;
export function serverNow() { return Date.now() + clockOffset; }
function learnClock(res) {
    const d = Date.parse(res.headers.get('Date') || '');
    if (Number.isNaN(d)) return;
    const off = d - Date.now();
    clockOffset = Math.abs(off) > 2000 ? off : 0;
}

// api('/v1/jobs', {method, body, signal, token, headers}) -> parsed JSON.
// Throws ApiError on any non-2xx answer or network failure.
export async function api(path, opts = {}) {
    const token = opts.token ?? session.token();
    const headers = { Accept: 'application/json', ...opts.headers };
    if (token) headers.Authorization = `Bearer ${token}`;
    const init = { method: opts.method || 'GET', headers, signal: opts.signal, cache: 'no-store' };
    if (opts.body !== undefined) {
        headers['Content-Type'] = 'application/json';
        init.body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
    }
    let res;
    try {
        res = await fetch(path, init);
    } catch (e) {
        if (e.name === 'AbortError') throw e;
        throw new ApiError(0, 'network', `cannot reach the server (${e.message})`);
    }
    learnClock(res);
    const text = await res.text();
    let data = null;
    if (text) {
        try { data = JSON.parse(text); } catch { data = null; }
    }
    if (!res.ok) {
        const err = data && typeof data === 'object' && data.error ? data.error : {};
        const e = new ApiError(res.status, err.code, err.message || res.statusText || 'request failed', err.field);
        if (res.status === 401 && opts.token === undefined) onUnauthorized(e);
        throw e;
    }
    if (data === null && text) throw new ApiError(res.status, 'bad_response', 'the server answered with something that is not JSON');
    return data;
}

export const jobPath = (id) => `/v1/jobs/${encodeURIComponent(id)}`;

// Random hex for Idempotency-Key (crypto.randomUUID needs a secure context).
export function randomKey() {
    const b = new Uint8Array(16);
    crypto.getRandomValues(b);
    return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}
