// Jobs list: filters, keyset "load more", live updates from the event stream.
//
// Consistency rule: each row remembers when its data became known (freshAt,
// client clock). A job from a list or GET /v1/jobs/{id} answer replaces the
// row only if that request started after freshAt; a live event always applies
// (the stream is in order) and sets freshAt to now. So an answer that was
// already on the wire when an event arrived cannot undo the event, and a
// refetch after a reconnect (which starts later) always wins.
import { api, ApiError, jobPath } from './api.js';
import { h, replace, notice } from './dom.js';
import { STATES, TYPES, badge, timeEl, progressCell } from './format.js';

const PAGE = 50;
const MAX_RESYNC_PAGES = 20;

export function mount(root, { live, query, signal }) {
    const filter = {
        type: TYPES.includes(query.get('type')) ? query.get('type') : '',
        state: STATES.includes(query.get('state')) ? query.get('state') : '',
    };
    const rows = new Map();    // id -> {job, freshAt, tr, stateCell, progressCell}
    const pending = new Map(); // id -> {dirty} for GET /v1/jobs/{id} in flight
    let cursor = null;         // next_cursor of the last page loaded
    let gen = 0;               // bumped by each full reload; older answers are dropped
    let loaded = false;        // a first list has been shown

    const typeSel = select('filter-type', 'Type', TYPES, filter.type);
    const stateSel = select('filter-state', 'State', STATES, filter.state);
    const count = h('span', { class: 'count muted', 'data-testid': 'jobs-count' });
    const status = h('div', { class: 'status-area', 'aria-live': 'polite' });
    const tbody = h('tbody');
    const table = h('table', { class: 'grid jobs', 'data-testid': 'jobs-table' },
        h('caption', { class: 'visually-hidden' }, 'Jobs, newest first'),
        h('thead', {}, h('tr', {}, ['Name', 'ID', 'Type', 'State', 'Priority', 'Created', 'Progress']
            .map((t) => h('th', { scope: 'col' }, t)))),
        tbody);
    const empty = h('p', { class: 'empty', 'data-testid': 'jobs-empty', hidden: true });
    const moreBtn = h('button', { type: 'button', 'data-testid': 'load-more', hidden: true, onclick: loadMore }, 'Load more');
    const moreStatus = h('span', { class: 'muted', 'aria-live': 'polite' });

    replace(root,
        h('div', { class: 'page-head' }, h('h1', {}, 'Jobs'), count),
        h('form', { class: 'filters', 'aria-label': 'Filter jobs', onsubmit: (e) => e.preventDefault() },
            typeSel.wrap, stateSel.wrap),
        status,
        h('div', { class: 'table-scroll' }, table),
        empty,
        h('div', { class: 'more' }, moreBtn, ' ', moreStatus));

    for (const sel of [typeSel.select, stateSel.select]) {
        sel.addEventListener('change', () => {
            filter.type = typeSel.select.value;
            filter.state = stateSel.select.value;
            const q = new URLSearchParams();
            if (filter.type) q.set('type', filter.type);
            if (filter.state) q.set('state', filter.state);
            const qs = q.toString();
            history.replaceState(null, '', `#/jobs${qs ? `?${qs}` : ''}`);
            for (const r of rows.values()) r.tr.remove();
            rows.clear();
            cursor = null;
            loaded = false;
            footer();
            reload();
        });
    }

    const offJob = live ? live.on('job', onJob) : () => {};
    // After every (re)connect the stream may have missed events: refetch.
    const offOpen = live ? live.on('open', () => reload()) : () => {};
    reload();
    return () => { offJob(); offOpen(); };

    function listUrl(c) {
        const q = new URLSearchParams();
        if (filter.type) q.set('type', filter.type);
        if (filter.state) q.set('state', filter.state);
        q.set('limit', String(PAGE));
        if (c) q.set('cursor', c);
        return `/v1/jobs?${q}`;
    }

    function matches(job) {
        return (!filter.type || job.type === filter.type) && (!filter.state || job.state === filter.state);
    }

    // Newest first: created_at descending, then id descending.
    function newer(a, b) {
        if (a.created_at !== b.created_at) return a.created_at > b.created_at;
        return a.id > b.id;
    }

    // Full reload, as deep as the list goes now: pages are fetched until they
    // reach the oldest row shown (one page when the list is empty).
    async function reload() {
        const my = ++gen;
        const startedAt = performance.now();
        const lastTr = tbody.lastElementChild;
        const floor = lastTr && rows.has(lastTr.dataset.jobId) ? rows.get(lastTr.dataset.jobId).job : null;
        const covered = (jobs) => !floor || (jobs.length > 0 && !newer(jobs[jobs.length - 1], floor));
        if (!loaded) replace(status, notice('loading', 'Loading jobs…', 'jobs-loading'));
        try {
            const jobs = [];
            let next = null, pages = 0;
            do {
                const page = await api(listUrl(next), { signal });
                if (my !== gen) return;
                jobs.push(...(page.jobs || []));
                next = page.next_cursor || null;
                pages++;
            } while (next && !covered(jobs) && pages < MAX_RESYNC_PAGES);
            reconcile(jobs, startedAt);
            cursor = next;
            loaded = true;
            replace(status);
            footer();
        } catch (e) {
            if (signal.aborted || my !== gen) return;
            const text = e instanceof ApiError ? e.describe() : e.message;
            replace(status, notice('error', loaded ?
                `Could not refresh the list (${text}); rows may be out of date.` :
                `Could not load jobs: ${text}`, 'jobs-error'),
            h('button', { type: 'button', onclick: () => reload() }, 'Retry'));
        }
    }

    // Makes the table show the answer's jobs in order, reusing existing rows
    // (keeps focus). Rows the answer lacks are dropped unless their data is
    // newer than the answer (a job fetched after an event while the list
    // request was in flight).
    function reconcile(jobs, startedAt) {
        const keep = new Set();
        const ordered = [];
        for (const job of jobs) {
            if (keep.has(job.id)) continue;
            keep.add(job.id);
            ordered.push(upsertData(job, startedAt));
        }
        for (const [id, r] of rows) {
            if (keep.has(id)) continue;
            if (r.freshAt > startedAt) ordered.push(r);
            else rows.delete(id);
        }
        ordered.sort((a, b) => (newer(a.job, b.job) ? -1 : newer(b.job, a.job) ? 1 : 0));
        let ref = tbody.firstChild;
        for (const { tr } of ordered) {
            if (tr === ref) ref = ref.nextSibling;
            else tbody.insertBefore(tr, ref);
        }
        while (ref) { const n = ref.nextSibling; ref.remove(); ref = n; }
    }

    // Creates or updates the row's data (not its position) from an answer
    // whose request started at startedAt.
    function upsertData(job, startedAt) {
        let r = rows.get(job.id);
        if (!r) {
            r = makeRow(job);
            r.freshAt = startedAt;
            rows.set(job.id, r);
        } else if (startedAt >= r.freshAt) {
            r.job = job;
            r.freshAt = startedAt;
            paint(r);
        }
        return r;
    }

    async function loadMore() {
        if (!cursor) return;
        const my = gen;
        const startedAt = performance.now();
        moreBtn.disabled = true;
        replace(moreStatus, 'Loading…');
        try {
            const page = await api(listUrl(cursor), { signal });
            if (my !== gen) return;
            for (const job of page.jobs || []) {
                const known = rows.has(job.id);
                const r = upsertData(job, startedAt);
                if (!known) tbody.appendChild(r.tr);
            }
            cursor = page.next_cursor || null;
            replace(moreStatus);
        } catch (e) {
            if (signal.aborted) return;
            replace(moreStatus, notice('error', `Could not load more: ${e instanceof ApiError ? e.describe() : e.message}`));
        } finally {
            moreBtn.disabled = false;
            footer();
        }
    }

    function onJob(ev) {
        const r = rows.get(ev.job_id);
        if (r) {
            const job = { ...r.job };
            if (ev.state) job.state = ev.state;
            if (typeof ev.progress === 'number') job.progress = ev.progress;
            if (ev.ts) job.updated_at = ev.ts;
            r.job = job;
            r.freshAt = performance.now();
            paint(r, true);
            return;
        }
        // Unknown job: fetch it unless the event shows it cannot match.
        if (filter.type && ev.type && ev.type !== filter.type) return;
        if (filter.state && ev.state !== filter.state) return;
        fetchJob(ev.job_id);
    }

    // GET /v1/jobs/{id} for a job the list does not show yet; an event that
    // arrives meanwhile makes it fetch again rather than trust an older answer.
    async function fetchJob(id) {
        const p = pending.get(id);
        if (p) { p.dirty = true; return; }
        const st = { dirty: true };
        pending.set(id, st);
        try {
            while (st.dirty) {
                st.dirty = false;
                const startedAt = performance.now();
                const job = await api(jobPath(id), { signal });
                if (rows.has(id)) { upsertData(job, startedAt); continue; }
                if (matches(job)) insertSorted(job, startedAt);
            }
        } catch (e) {
            if (!signal.aborted && !(e instanceof ApiError && e.status === 404)) console.warn('gantry: cannot fetch job', id, e);
        } finally {
            pending.delete(id);
        }
    }

    function insertSorted(job, startedAt) {
        let before = null;
        for (const r of rows.values()) {
            if (newer(job, r.job) && (!before || newer(before.job, r.job))) before = r;
        }
        // Older than every loaded row while more pages exist: it belongs to a
        // page not loaded yet, where "load more" will find it.
        if (!before && cursor) return;
        const r = upsertData(job, startedAt);
        tbody.insertBefore(r.tr, before ? before.tr : null);
        flash(r.tr);
        footer();
    }

    function makeRow(job) {
        const stateCell = h('td', { 'data-testid': 'job-state' });
        const progress = h('td', { class: 'num', 'data-testid': 'job-progress' });
        const tr = h('tr', { 'data-testid': 'job-row', dataset: { jobId: job.id } },
            h('td', { class: 'name' }, h('a', { href: `#/jobs/${encodeURIComponent(job.id)}`, 'data-testid': 'job-link' },
                job.name || '(unnamed)')),
            h('td', { class: 'mono' }, job.id),
            h('td', {}, job.type),
            stateCell,
            h('td', {}, job.priority || '—'),
            h('td', { class: 'time' }, timeEl(job.created_at)),
            progress);
        const r = { job, freshAt: 0, tr, stateCell, progressCell: progress };
        paint(r);
        return r;
    }

    function paint(r, changed = false) {
        const { job } = r;
        if (r.tr.dataset.state !== job.state) {
            r.tr.dataset.state = job.state;
            replace(r.stateCell, badge(job.state));
            if (changed) flash(r.tr);
        }
        // an inference job serves (replicas and SLO on its page): no progress to show
        replace(r.progressCell, job.type === 'inference' ? h('span', { class: 'muted', title: 'serving: replicas and SLO on its page' }, '—') :
            progressCell(job.progress));
        const stale = !matches(job);
        r.tr.classList.toggle('stale', stale);
        r.tr.title = stale ? 'No longer matches the filter (kept until the list is refreshed)' : '';
        if (job.error) r.stateCell.title = job.error;
    }

    function footer() {
        const n = rows.size;
        count.textContent = loaded ? `${n} shown${cursor ? ', more available' : ''}` : '';
        empty.hidden = !loaded || n > 0;
        empty.textContent = filter.type || filter.state ? 'No jobs match these filters.' : 'No jobs yet. Submit one to see it here.';
        moreBtn.hidden = !cursor;
    }
}

function flash(tr) {
    tr.classList.remove('flash');
    void tr.offsetWidth; // restart the animation
    tr.classList.add('flash');
}

function select(testid, label, values, current) {
    const id = `f-${testid}`;
    const sel = h('select', { id, 'data-testid': testid },
        h('option', { value: '' }, 'any'),
        values.map((v) => h('option', { value: v, selected: v === current }, v)));
    return { select: sel, wrap: h('span', { class: 'field-inline' }, h('label', { for: id }, label), ' ', sel) };
}
