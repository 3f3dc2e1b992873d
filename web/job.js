// Job detail: summary (an inference job's served model version, as
// spec.resolved says, and the alias it follows), spec, event timeline (state
// changes and notes such as an alias move; progress updates behind a toggle),
// result (placement rendered in full; a program job's output files with
// downloads), a program job's logs followed live (logs.js), a search's trials
// (search.js) in place of curves and logs, cancel. Refetches job and events when the stream
// reports an event for this job and after every stream (re)connect.
import { api, ApiError, jobPath } from './api.js';
import { h, replace, notice } from './dom.js';
import { candidatesTable, devicesTable } from './placement.js';
import { mountCurves, designRows } from './curves.js';
import { mountLogs, specRanks } from './logs.js';
import { mountSearch, isSearch } from './search.js';
import { outputsTable } from './outputs.js';
import { modelHref } from './models.js';
import {
    badge, timeEl, fmtMicros, fmtSeconds, fmtPct, fmtMetric, progressCell,
    prettyJson, isTerminal,
} from './format.js';

const SPEC_OPEN_MAX_LINES = 60;
const MIN_REFETCH_MS = 300;

export function mount(root, { me, live, params, signal }) {
    const id = params[0];
    const canCancel = me.role === 'member' || me.role === 'admin';
    let job = null;
    let resultKey = null;   // JSON of the rendered result, to re-render only on change
    let confirming = false; // cancel asked for confirmation
    let showProgress = false;
    let points = [];        // the curves' last answer (an inference job's replicas and SLO)

    const title = h('h1', {}, id);
    const stateBadge = h('span', { 'data-testid': 'job-state-badge' });
    const actions = h('div', { class: 'head-actions' });
    const status = h('div', { class: 'status-area', 'aria-live': 'polite' });
    const summary = h('dl', { class: 'summary', 'data-testid': 'job-summary' });
    const specBox = h('div', {});
    const timelineBox = h('div', {});
    const resultBox = h('div', { 'data-testid': 'result' });
    const curvesBox = h('div', { 'data-testid': 'curves' });
    const curvesSec = h('section', { 'aria-labelledby': 'sec-curves', hidden: true }, h('h2', { id: 'sec-curves' }, 'Curves'), curvesBox);
    let curves = null;
    // a program job's output (spec.program): its log pane, followed live
    const logsBox = h('div', { 'data-testid': 'logs-pane' });
    const logsSec = h('section', { 'aria-labelledby': 'sec-logs', hidden: true }, h('h2', { id: 'sec-logs' }, 'Logs'), logsBox);
    let logs = null;
    // a search (spec.program with spec.search): its trials, never curves or logs of its own
    const searchBox = h('div', { 'data-testid': 'search' });
    const searchSec = h('section', { 'aria-labelledby': 'sec-search', hidden: true }, h('h2', { id: 'sec-search' }, 'Search'), searchBox);
    let search = null;
    const body = h('div', { hidden: true },
        h('section', { 'aria-labelledby': 'sec-summary' }, h('h2', { id: 'sec-summary', class: 'visually-hidden' }, 'Summary'), summary),
        searchSec,
        curvesSec,
        logsSec,
        h('section', { 'aria-labelledby': 'sec-timeline' }, h('h2', { id: 'sec-timeline' }, 'Timeline'), timelineBox),
        h('section', { 'aria-labelledby': 'sec-result' }, h('h2', { id: 'sec-result' }, 'Result'), resultBox),
        h('section', { 'aria-labelledby': 'sec-spec' }, h('h2', { id: 'sec-spec' }, 'Spec'), specBox));

    replace(root,
        h('p', { class: 'crumbs' }, h('a', { href: '#/jobs' }, '← Jobs')),
        h('div', { class: 'page-head', 'data-testid': 'job-detail', dataset: { jobId: id } },
            title, stateBadge, actions),
        status, body);
    replace(status, notice('loading', 'Loading job…', 'job-loading'));

    let inflight = false, dirty = false, lastStart = 0;
    const offJob = live ? live.on('job', (ev) => { if (ev.job_id === id) refresh(); }) : () => {};
    const offOpen = live ? live.on('open', () => refresh()) : () => {};
    refresh();
    return () => { offJob(); offOpen(); };

    // One fetch at a time; events during a fetch cause exactly one more.
    async function refresh() {
        if (inflight) { dirty = true; return; }
        inflight = true;
        try {
            do {
                dirty = false;
                const wait = lastStart + MIN_REFETCH_MS - performance.now();
                if (wait > 0) await new Promise((r) => setTimeout(r, wait));
                lastStart = performance.now();
                const [j, ev] = await Promise.all([
                    api(jobPath(id), { signal }),
                    api(`${jobPath(id)}/events`, { signal }),
                ]);
                job = j;
                render(j, (ev && ev.events) || []);
                replace(status);
            } while (dirty && !signal.aborted);
        } catch (e) {
            if (signal.aborted) return;
            if (e instanceof ApiError && e.status === 404) {
                replace(status, notice('error', 'No such job in your tenant.', 'job-error'));
                body.hidden = true;
            } else {
                const text = e instanceof ApiError ? e.describe() : e.message;
                replace(status, notice('error', job ? `Could not refresh (${text}); showing older data.` : `Could not load the job: ${text}`, 'job-error'),
                    h('button', { type: 'button', onclick: () => refresh() }, 'Retry'));
            }
        } finally {
            inflight = false;
        }
    }

    function render(j, events) {
        if (isSearch(j.spec)) {
            if (!search) {
                searchSec.hidden = false;
                search = mountSearch(searchBox, { id, live, signal });
            }
            search.update(j);
        } else if (!curves && (j.type === 'training' || j.type === 'inference' || j.type === 'federated')) {
            curvesSec.hidden = false;
            curves = mountCurves(curvesBox, {
                id, type: j.type, program: isProgram(j.spec), signal,
                onPoints: (pts) => { points = pts; if (job) renderSummary(job); },
            });
        } else if (curves) {
            curves.update();
        }
        if (!logs && isProgram(j.spec) && !isSearch(j.spec)) {
            logsSec.hidden = false;
            logs = mountLogs(logsBox, { id, ranks: specRanks(j.spec), signal });
        }
        title.textContent = j.name || j.id;
        document.title = `${j.name || j.id} · gantry`;
        replace(stateBadge, badge(j.state));
        renderActions(j);
        renderSummary(j);
        if (!specBox.firstChild) renderSpec(j.spec);
        renderTimeline(events);
        const key = JSON.stringify([j.result, j.state, j.error]);
        if (key !== resultKey) {
            resultKey = key;
            renderResult(j);
        }
        body.hidden = false;
    }

    function renderActions(j) {
        if (!canCancel || isTerminal(j.state)) { confirming = false; actions.replaceChildren(); return; }
        const err = h('span', { class: 'inline-error', role: 'alert', 'data-testid': 'cancel-error' });
        if (!confirming) {
            replace(actions, h('button', {
                type: 'button', class: 'danger', 'data-testid': 'cancel',
                onclick: () => { confirming = true; renderActions(job); actions.querySelector('[data-testid="cancel-confirm"]').focus(); },
            }, 'Cancel job'));
            return;
        }
        const yes = h('button', { type: 'button', class: 'danger', 'data-testid': 'cancel-confirm' }, 'Yes, cancel it');
        const no = h('button', {
            type: 'button', 'data-testid': 'cancel-keep',
            onclick: () => { confirming = false; renderActions(job); actions.querySelector('[data-testid="cancel"]').focus(); },
        }, 'Keep it');
        yes.addEventListener('click', async () => {
            yes.disabled = true; no.disabled = true;
            replace(err, 'Cancelling…');
            try {
                await api(`${jobPath(id)}/cancel`, { method: 'POST', signal });
                confirming = false;
                await refresh();
            } catch (e) {
                if (signal.aborted) return;
                yes.disabled = false; no.disabled = false;
                replace(err, `Cancel failed: ${e instanceof ApiError ? e.describe() : e.message}`);
            }
        });
        replace(actions, h('span', {}, 'Cancel this job?'), ' ', yes, ' ', no, ' ', err);
    }

    function renderSummary(j) {
        const secs = (a, b) => (a && b ? (Date.parse(b) - Date.parse(a)) / 1000 : null);
        const items = [
            ['ID', h('span', { class: 'mono' }, j.id)],
            ['Type', j.type],
            ['State', badge(j.state)],
            ['Priority', j.priority || '—'],
            ...(j.type === 'inference' ? [['Replicas', replicasCell(j.spec, points)], ['SLO', sloCell(j.spec, points)]] :
                [['Progress', progressOf(j)]]),
            ['Worker', j.worker ? h('span', { class: 'mono' }, j.worker) : '—'],
            ['Tenant', h('span', { class: 'mono' }, j.tenant || '—')],
            ['Created', timeEl(j.created_at)],
            ['Started', timeEl(j.started_at)],
            ['Finished', timeEl(j.finished_at)],
            ['Updated', timeEl(j.updated_at)],
        ];
        const served = servedModel(j.spec);
        if (served) items.push(['Serves', served]);
        const trial = trialOf(j.spec);
        if (trial) items.push(['Trial of', trial]);
        const waited = secs(j.created_at, j.started_at);
        if (waited !== null) items.push(['Queued for', fmtSeconds(waited)]);
        const ran = secs(j.started_at, j.finished_at);
        if (ran !== null) items.push(['Ran for', fmtSeconds(ran)]);
        replace(summary, items.map(([k, v]) => h('div', {}, h('dt', {}, k), h('dd', {}, v))));
        if (j.error) {
            summary.appendChild(h('div', { class: 'wide' }, h('dt', {}, 'Error'),
                h('dd', { class: 'error-text', 'data-testid': 'job-error-text' }, j.error)));
        }
    }

    function renderSpec(spec) {
        if (spec === undefined || spec === null) { replace(specBox, h('p', { class: 'muted' }, 'No spec.')); return; }
        const text = prettyJson(spec);
        const lines = text.split('\n').length;
        replace(specBox, h('details', { open: lines <= SPEC_OPEN_MAX_LINES, 'data-testid': 'job-spec' },
            h('summary', {}, `Spec JSON (${lines} lines)`),
            h('pre', { class: 'json' }, text)));
    }

    function renderTimeline(events) {
        const isProgress = (e) => !e.state && typeof e.progress === 'number';
        const progressOnly = events.filter(isProgress).length;
        const shown = showProgress ? events : events.filter((e) => !isProgress(e));
        const toggle = progressOnly ? h('label', { class: 'toggle' },
            h('input', {
                type: 'checkbox', checked: showProgress, 'data-testid': 'show-progress-events',
                onchange: (e) => { showProgress = e.target.checked; renderTimeline(events); },
            }), ` Show ${progressOnly} progress update${progressOnly === 1 ? '' : 's'}`) : null;
        if (!events.length) {
            replace(timelineBox, h('p', { class: 'muted', 'data-testid': 'events-empty' }, 'No events yet.'));
            return;
        }
        const hadFocus = timelineBox.contains(document.activeElement);
        replace(timelineBox, toggle, h('div', { class: 'table-scroll' }, h('table', { class: 'grid timeline', 'data-testid': 'events' },
            h('caption', { class: 'visually-hidden' }, 'Job events, oldest first'),
            h('thead', {}, h('tr', {}, ['Time', 'State', 'Reason', 'Source', 'Progress'].map((t) => h('th', { scope: 'col' }, t)))),
            h('tbody', {}, shown.map((e) => h('tr', { 'data-testid': 'event-row', dataset: { state: e.state || '' }, class: e.state ? '' : 'progress-only' },
                h('td', { class: 'time' }, timeEl(e.ts, true)),
                h('td', { 'data-testid': 'event-state' }, e.state ? badge(e.state) : h('span', { class: 'muted' }, isProgress(e) ? 'progress' : 'note')),
                h('td', {}, e.reason || ''),
                h('td', { class: 'mono' }, e.source || ''),
                h('td', { class: 'num' }, typeof e.progress === 'number' ? fmtPct(e.progress) : '')))))));
        if (hadFocus && toggle) toggle.querySelector('input').focus();
    }

    function renderResult(j) {
        const r = j.result;
        if (r === null || r === undefined) {
            const text = j.state === 'failed' ? 'No result: the job failed.' :
                j.state === 'cancelled' ? 'No result: the job was cancelled.' :
                isTerminal(j.state) ? 'No result.' : 'No result yet.';
            replace(resultBox, h('p', { class: 'muted', 'data-testid': 'result-empty' }, text));
            return;
        }
        const parts = [];
        if (j.type === 'placement' && typeof r === 'object') parts.push(placement(r, j.spec, j.id || id));
        if (r.metrics && typeof r.metrics === 'object') parts.push(metrics(r.metrics));
        if (j.type === 'federated' && r.design) parts.push(designView(r.design));
        if (r.outputs && typeof r.outputs === 'object' && Array.isArray(r.outputs.files)) parts.push(outputsTable(j.id || id, r.outputs.files));
        parts.push(rawJson(r));
        replace(resultBox, parts);
    }
}

const isProgram = (spec) => !!spec && typeof spec.program === 'object' && spec.program !== null;
const isNum = (v) => typeof v === 'number' && Number.isFinite(v);

// A job's progress as the API says; "—" when it has none (a program that
// declares no total in its metrics lines), never a made-up 0%.
function progressOf(j) {
    const why = isProgram(j.spec) ? 'this program reports no progress: a metrics line with epoch and epochs, step and steps, or progress (0 to 1) gives one' :
        'no progress reported';
    return h('span', { 'data-testid': 'job-progress', dataset: { progress: isNum(j.progress) ? String(j.progress) : '' },
        title: isNum(j.progress) ? undefined : why }, progressCell(j.progress));
}

// The newest point that has key.
function lastWith(points, key) {
    for (let i = (points || []).length - 1; i >= 0; i--) if (points[i] && isNum(points[i][key])) return points[i];
    return null;
}

// An inference job's replicas: the latest the autoscaler reported (and its
// target), with the spec's bounds.
function replicasCell(spec, points) {
    const rs = spec ? spec.replicas : undefined;
    const r = Number.isInteger(rs) ? { min: rs, max: rs } : rs && typeof rs === 'object' ? rs : {};
    const p = lastWith(points, 'replicas');
    const bounds = isNum(r.min) || isNum(r.max) ? `min ${isNum(r.min) ? r.min : '—'}, max ${isNum(r.max) ? r.max : '—'}` : '';
    const parts = [p ? String(p.replicas) : '—'];
    if (p && isNum(p.target) && p.target !== p.replicas) parts.push(` (target ${p.target})`);
    // replicas.min 0: the autoscaler released every replica after idle_s without a request
    const zero = p && r.min === 0 && p.replicas === 0 && p.target === 0;
    if (zero) parts.push(' (scaled to zero: the next request starts one)');
    const cold = lastWith(points, 'cold_starts');
    if (cold) parts.push(` · ${cold.cold_starts} cold start${cold.cold_starts === 1 ? '' : 's'}`);
    return h('span', { 'data-testid': 'job-replicas', dataset: { replicas: p ? String(p.replicas) : '', scaledToZero: zero ? 'true' : 'false' } },
        ...parts, bounds ? h('span', { class: 'muted' }, ` · ${bounds}`) : '');
}

// An inference job's SLO: "p99 ≤ 50 ms" (the spec's, else the defaults the
// server applies: 100 ms at the 99th percentile), with the latest attainment.
function sloCell(spec, points) {
    const slo = spec && spec.slo && typeof spec.slo === 'object' ? spec.slo : {};
    const p = lastWith(points, 'slo_attainment');
    const target = `p${isNum(slo.percentile) ? slo.percentile : 99} ≤ ${fmtMetric('latency_ms', isNum(slo.latency_ms) ? slo.latency_ms : 100)}`;
    return h('span', { 'data-testid': 'job-slo', dataset: { attainment: p ? String(p.slo_attainment) : '' } },
        target, p ? h('span', { class: 'muted' }, ` · ${fmtMetric('slo_attainment', p.slo_attainment)} of requests within it`) : '');
}

// The model version an inference job serves (spec.resolved, set by the server
// at submission and when an alias it follows moves): "mlp v2 (alias
// production)", linking to the model's page; null for other jobs.
function servedModel(spec) {
    const r = spec && typeof spec.resolved === 'object' && spec.resolved !== null ? spec.resolved : null;
    if (!r || typeof r.name !== 'string' || !Number.isInteger(r.version)) return null;
    return h('span', { 'data-testid': 'job-model', dataset: { model: r.name, version: String(r.version), alias: r.alias || '' } },
        h('a', { href: modelHref(r.name), class: 'mono' }, r.name), ` v${r.version}`,
        r.alias ? h('span', { class: 'muted' }, ` (alias ${r.alias})`) : null);
}

// A search's trial (spec.trial, set by the server): "trial 3 of j_..." linking to the search.
function trialOf(spec) {
    const t = spec && typeof spec.trial === 'object' && spec.trial !== null ? spec.trial : null;
    if (!t || typeof t.search !== 'string' || !Number.isInteger(t.index)) return null;
    return h('span', { 'data-testid': 'job-trial', dataset: { search: t.search, trial: String(t.index) } },
        `trial ${t.index} of `, h('a', { href: `#/jobs/${encodeURIComponent(t.search)}`, class: 'mono' }, t.search));
}

// Raw result JSON, pretty-printed only when first opened (a plan with a
// schedule runs to megabytes).
function rawJson(r) {
    const pre = h('pre', { class: 'json' });
    const details = h('details', { 'data-testid': 'result-raw' }, h('summary', {}, 'Raw result JSON'), pre);
    details.addEventListener('toggle', () => {
        if (details.open && !pre.firstChild) pre.textContent = prettyJson(r);
    });
    return details;
}

// the communication groups of a federated job: a row per parallel class
function designView(d) {
    const rows = designRows(d);
    return h('div', { 'data-testid': 'design' },
        h('h3', {}, `Communication groups: ${d.kind || 'design'}, ${rows.length} parallel class${rows.length === 1 ? '' : 'es'}`),
        h('p', { class: 'muted' }, 'Who adds whose masked messages: a sum is aggregated within the groups of one class (SecureD-FL: '
            + 'iteration k, class k mod P); two sites share a group at most once. Every sum is masked over all sites, so the '
            + 'groups spread the work, not the privacy (docs/federated.md).'),
        h('table', { class: 'events' },
            h('thead', {}, h('tr', {}, h('th', {}, 'Class'), h('th', {}, 'Groups'))),
            h('tbody', {}, rows.map(([c, groups]) => h('tr', { 'data-testid': 'design-class' }, h('td', {}, String(c)), h('td', {}, groups.join('  ')))))));
}

function metrics(m) {
    return h('div', {},
        h('h3', {}, 'Metrics'),
        h('dl', { class: 'summary', 'data-testid': 'metrics' },
            Object.entries(m).map(([k, v]) => h('div', {}, h('dt', { class: 'mono' }, k),
                h('dd', { class: 'num', title: typeof v === 'number' ? String(v) : undefined },
                    typeof v === 'number' ? fmtMetric(k, v) : typeof v === 'object' ? JSON.stringify(v) : String(v))))));
}

// Placement result: best algorithm, candidates, per-device memory bars.
function placement(r, spec, jobId) {
    const plan = r.plan && typeof r.plan === 'object' ? r.plan : null;
    const specDevices = spec && spec.graph && Array.isArray(spec.graph.devices) ? spec.graph.devices : [];
    const planDevices = plan && Array.isArray(plan.devices) ? plan.devices : [];
    const deviceNames = (planDevices.length ? planDevices : specDevices).map((d, i) => (d && d.name) || `device ${i}`);
    const candidates = Array.isArray(r.candidates) ? r.candidates : [];
    const best = candidates.find((c) => c.algorithm === r.best);

    const out = [h('p', { class: 'best' }, 'Best algorithm: ',
        h('strong', { 'data-testid': 'best-algorithm' }, r.best || '—'),
        best && typeof best.makespan_us === 'number' ? ` · simulated step time ${fmtMicros(best.makespan_us)}` : '')];
    if (plan && plan.schedule && typeof plan.schedule === 'object') {
        out.push(h('p', { class: 'plan-link' }, h('a', { href: `#/jobs/${encodeURIComponent(jobId)}/plan`, 'data-testid': 'plan-link' },
            'Open the plan view'), ' — Gantt chart of the simulated schedule, memory over time, algorithm comparison.'));
    } else if (plan) {
        out.push(h('p', { class: 'muted', 'data-testid': 'plan-no-schedule' },
            `No schedule to chart: ${typeof plan.schedule_omitted === 'string' && plan.schedule_omitted ? plan.schedule_omitted : 'this result has no schedule'}.`));
    }

    if (candidates.length) {
        const devs = deviceNames.map((name, i) => ({
            name,
            memory_bytes: planDevices[i] && typeof planDevices[i].memory_bytes === 'number' ? planDevices[i].memory_bytes :
                specDevices[i] && typeof specDevices[i].memory_bytes === 'number' ? specDevices[i].memory_bytes : undefined,
        }));
        out.push(h('h3', {}, 'Candidates'), h('div', { class: 'table-scroll' }, candidatesTable(r, devs)));
    }

    if (planDevices.length) {
        out.push(h('h3', {}, `Devices${plan.algorithm ? ` (plan from ${plan.algorithm})` : ''}`),
            h('div', { class: 'table-scroll' }, devicesTable(planDevices, specDevices)));
    }
    return h('div', { class: 'placement', 'data-testid': 'placement-result' }, out);
}
