// gantry dashboard: session, header, hash router.
//
// Routes: #/jobs[?type=&state=], #/jobs/<id>, #/jobs/<id>/plan, #/workers,
// #/cluster, #/models[/<name>], #/submit.
// Each page module exports mount(root, ctx) and may return a cleanup
// function; ctx = {me, live, params, query, signal, navigate}. The router
// aborts ctx.signal and calls the cleanup when the page is left.
import { api, ApiError, session, setUnauthorizedHandler } from './api.js';
import { LiveStream } from './live.js';
import { h, replace, notice, focusHeading } from './dom.js';
import * as jobsPage from './jobs.js';
import * as jobPage from './job.js';
import * as planPage from './plan.js';
import * as workersPage from './workers.js';
import * as clusterPage from './cluster.js';
import * as modelsPage from './models.js';
import * as submitPage from './submit.js';
import * as loginPage from './login.js';

const ROUTES = [
    { re: /^\/jobs\/?$/, page: jobsPage, nav: 'jobs', title: 'Jobs' },
    { re: /^\/jobs\/([^/]+)$/, page: jobPage, nav: 'jobs', title: 'Job' },
    { re: /^\/jobs\/([^/]+)\/plan$/, page: planPage, nav: 'jobs', title: 'Plan' },
    { re: /^\/workers\/?$/, page: workersPage, nav: 'workers', title: 'Workers' },
    { re: /^\/cluster\/?$/, page: clusterPage, nav: 'cluster', title: 'Cluster' },
    { re: /^\/models\/?$/, page: modelsPage, nav: 'models', title: 'Models' },
    { re: /^\/models\/([^/]+)$/, page: modelsPage, nav: 'models', title: 'Model' },
    { re: /^\/submit\/?$/, page: submitPage, nav: 'submit', title: 'Submit' },
];

const LIVE_TEXT = {
    idle: 'offline',
    connecting: 'connecting…',
    open: 'live',
    down: 'connection lost, reconnecting…',
};

const el = {
    main: document.getElementById('main'),
    nav: document.getElementById('nav'),
    session: document.getElementById('session'),
    whoami: document.querySelector('[data-testid="whoami"]'),
    live: document.querySelector('[data-testid="live"]'),
    logout: document.querySelector('[data-testid="logout"]'),
};

let me = null;      // /v1/whoami answer while logged in
let live = null;    // LiveStream while logged in
let current = null; // {ctrl, cleanup} of the mounted page
let lastPath = '';  // focus moves to the new page's heading only when the path changes

export function navigate(hash) {
    if (location.hash === hash) route();
    else location.hash = hash;
}

function parseHash() {
    const raw = location.hash.replace(/^#/, '') || '/jobs';
    const q = raw.indexOf('?');
    const path = q < 0 ? raw : raw.slice(0, q);
    const query = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
    return { path, query };
}

function unmount() {
    if (!current) return;
    current.ctrl.abort();
    try { if (typeof current.cleanup === 'function') current.cleanup(); } catch (e) { console.error(e); }
    current = null;
}

function route() {
    if (!me) return;
    unmount();
    window.scrollTo(0, 0);
    const { path, query } = parseHash();
    let match = null, r = null;
    for (r of ROUTES) {
        match = path.match(r.re);
        if (match) break;
    }
    for (const a of el.nav.querySelectorAll('a')) {
        if (match && a.dataset.nav === r.nav) a.setAttribute('aria-current', 'page');
        else a.removeAttribute('aria-current');
    }
    if (!match) {
        document.title = 'Not found · gantry';
        replace(el.main, h('h1', {}, 'Not found'),
            h('p', {}, 'There is no page at ', h('code', {}, location.hash), '. ', h('a', { href: '#/jobs' }, 'Go to jobs'), '.'));
        return;
    }
    document.title = `${r.title} · gantry`;
    const ctrl = new AbortController();
    const params = match.slice(1).map((s) => { try { return decodeURIComponent(s); } catch { return s; } });
    const root = h('div', { class: 'page' });
    replace(el.main, root);
    current = { ctrl, cleanup: null };
    current.cleanup = r.page.mount(root, { me, live, params, query, signal: ctrl.signal, navigate });
    if (path !== lastPath && lastPath) focusHeading(root);
    lastPath = path;
}

function showLive({ state, detail }) {
    el.live.dataset.state = state;
    el.live.textContent = LIVE_TEXT[state] || state;
    el.live.title = state === 'down' && detail ? `Live updates stopped: ${detail}` :
        state === 'open' ? 'Receiving live job events' : '';
}

function startSession(who) {
    me = who;
    el.whoami.replaceChildren(
        h('span', { class: 'tenant', title: who.tenant && who.tenant.id }, (who.tenant && who.tenant.name) || '?'),
        ' ', h('span', { class: `role role-${who.role}` }, who.role));
    for (const a of el.nav.querySelectorAll('[data-role-min="member"]')) a.hidden = who.role === 'viewer';
    el.nav.hidden = false;
    el.session.hidden = false;
    live = new LiveStream({
        url: '/v1/events',
        getToken: () => session.token(),
        onAuthError: () => endSession('Your token is no longer accepted (401). Log in again.'),
    });
    live.on('state', showLive);
    showLive({ state: 'connecting' });
    live.start();
    route();
}

function endSession(message) {
    unmount();
    if (live) { live.stop(); live = null; }
    me = null;
    session.clear();
    el.nav.hidden = true;
    el.session.hidden = true;
    el.whoami.replaceChildren();
    document.title = 'Log in · gantry';
    const root = h('div', { class: 'page' });
    replace(el.main, root);
    loginPage.mount(root, {
        message,
        onLogin: (token, who) => { session.set(token); startSession(who); },
    });
}

async function resume() {
    const token = session.token();
    if (!token) return endSession('');
    replace(el.main, notice('loading', 'Checking your session…'));
    try {
        startSession(await api('/v1/whoami', { token }));
    } catch (e) {
        if (e instanceof ApiError && e.status === 401) return endSession('Your saved token is no longer accepted (401). Log in again.');
        replace(el.main, notice('error', `Cannot check your session: ${e instanceof ApiError ? e.describe() : e.message}`),
            h('p', {}, h('button', { type: 'button', onclick: resume }, 'Try again'), ' ',
                h('button', { type: 'button', onclick: () => endSession('') }, 'Log in with another token')));
    }
}

setUnauthorizedHandler(() => { if (me) endSession('Your token is no longer accepted (401). Log in again.'); });
el.logout.addEventListener('click', () => endSession(''));
// #token=... (login.js): kept as the form keeps it, out of the address bar before anything runs; pasted into an
// open tab, the page starts again with it
window.addEventListener('hashchange', () => (loginPage.tokenFromLink() ? location.reload() : route()));
loginPage.tokenFromLink();
resume();
