// Workers: GET /v1/workers every 2 s while the page is visible.
import { api, ApiError, serverNow } from './api.js';
import { h, replace, notice } from './dom.js';
import { badge, timeEl, fmtTime, fmtBytes, fmtPct, fmtSeconds, bar } from './format.js';

const PERIOD_MS = 2000;

export function mount(root, { signal }) {
    const status = h('div', { class: 'status-area', 'aria-live': 'polite' });
    const updated = h('span', { class: 'count muted', 'data-testid': 'workers-updated' });
    const tbody = h('tbody');
    const table = h('table', { class: 'grid workers', 'data-testid': 'workers-table', hidden: true },
        h('caption', { class: 'visually-hidden' }, 'Workers'),
        h('thead', {}, h('tr', {}, ['ID', 'Host', 'Kind', 'Slots', 'Memory', 'Labels', 'State', 'Running', 'Utilization', 'Last heartbeat']
            .map((t) => h('th', { scope: 'col' }, t)))),
        tbody);
    const empty = h('p', { class: 'empty', 'data-testid': 'workers-empty', hidden: true }, 'No workers are registered.');
    replace(root, h('div', { class: 'page-head' }, h('h1', {}, 'Workers'), updated),
        status, h('div', { class: 'table-scroll' }, table), empty);
    replace(status, notice('loading', 'Loading workers…', 'workers-loading'));

    let timer = null, lastOk = 0, stopped = false;

    const onVisibility = () => {
        clearTimeout(timer);
        if (document.visibilityState === 'visible') poll();
    };
    document.addEventListener('visibilitychange', onVisibility);
    poll();
    return () => {
        stopped = true;
        clearTimeout(timer);
        document.removeEventListener('visibilitychange', onVisibility);
    };

    async function poll() {
        clearTimeout(timer);
        try {
            const data = await api('/v1/workers', { signal });
            if (stopped) return;
            render(Array.isArray(data.workers) ? data.workers : []);
            lastOk = Date.now();
            replace(updated, `updated ${fmtTime(new Date().toISOString())}, every ${PERIOD_MS / 1000} s`);
            replace(status);
        } catch (e) {
            if (stopped || signal.aborted) return;
            const text = e instanceof ApiError ? e.describe() : e.message;
            replace(status, notice('error', lastOk ?
                `Refresh failed (${text}); the table shows data from ${fmtTime(new Date(lastOk).toISOString())}.` :
                `Could not load workers: ${text}`, 'workers-error'));
        }
        if (!stopped && document.visibilityState === 'visible') timer = setTimeout(poll, PERIOD_MS);
    }

    function render(workers) {
        table.hidden = workers.length === 0;
        empty.hidden = workers.length !== 0;
        const now = serverNow();
        // Rows are rebuilt every poll: put keyboard focus back on the same link.
        const focused = tbody.contains(document.activeElement) ? document.activeElement.getAttribute('href') : null;
        replace(tbody, workers.map((w) => {
            const age = w.last_heartbeat ? (now - Date.parse(w.last_heartbeat)) / 1000 : null;
            const labels = w.labels && typeof w.labels === 'object' ? Object.entries(w.labels) : [];
            return h('tr', { 'data-testid': 'worker-row', dataset: { workerId: w.id || '' } },
                h('td', { class: 'mono' }, w.id || '—'),
                h('td', { class: 'mono' }, w.host || '—'),
                h('td', {}, w.kind || '—'),
                h('td', { class: 'num' }, w.slots ?? '—'),
                h('td', { class: 'num' }, fmtBytes(w.memory_bytes)),
                h('td', {}, labels.length ? labels.map(([k, v]) => h('span', { class: 'chip' }, `${k}=${v}`)) : h('span', { class: 'muted' }, '—')),
                h('td', { 'data-testid': 'worker-state' }, badge(w.state, `worker-${w.state}`)),
                h('td', {}, w.running ? h('a', { href: `#/jobs/${encodeURIComponent(w.running)}`, class: 'mono' }, w.running) : h('span', { class: 'muted' }, '—')),
                h('td', { class: 'num' }, typeof w.utilization === 'number' ? bar(w.utilization, fmtPct(w.utilization)) : '—'),
                h('td', { class: 'time' }, timeEl(w.last_heartbeat),
                    age !== null && Number.isFinite(age) ? h('span', { class: `age${age > 30 ? ' stale-age' : ''}` }, ` (${fmtSeconds(age)} ago)`) : null));
        }));
        if (focused) {
            const again = [...tbody.querySelectorAll('a')].find((a) => a.getAttribute('href') === focused);
            if (again) again.focus({ preventScroll: true });
        }
    }
}
