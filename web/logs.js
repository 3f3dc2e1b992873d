// The log pane of a program job's page: GET /v1/jobs/{id}/logs?follow=1 (the
// last TAIL lines, then each new line as the program writes it, until the job
// ends) read with fetch, since EventSource cannot send the bearer token, and
// parsed by live.js's SseParser. Events: "log" (one line, control characters
// already escaped by the server), "end" (a rank's generation ended), "done"
// (the job ended; the server closes the stream).
//
// Every line is appended as a text node, never as markup. At most MAX_LINES
// stay in the page (the oldest are dropped). The pane scrolls to each new line
// while it is at its end; once the reader scrolls up it stays where it is
// until they scroll back down (or press "Jump to the end"). The rank selector
// restarts the stream with &rank=R. A stream that drops before "done" is
// reopened after RETRY_MS, the pane refilled from the tail.
import { session, jobPath } from './api.js';
import { SseParser } from './live.js';
import { h, replace, notice } from './dom.js';

const TAIL = 500;
const MAX_LINES = 5000;
const RETRY_MS = 2000;
const AT_END_PX = 8; // this close to the bottom counts as at the end

// the ranks a program spec allows at most (spec.workers: N or {min, max})
export function specRanks(spec) {
    const w = spec && spec.workers;
    const n = w && typeof w === 'object' ? w.max : w;
    return Number.isInteger(n) && n > 0 ? n : 1;
}

export function mountLogs(box, { id, ranks, signal }) {
    let rank = '';
    let ctrl = null;
    let gen = 0;      // bumped on every (re)start: an older stream's events are ignored
    let lines = 0;
    let stick = true; // follow the end
    let retry = null;

    const select = h('select', { 'data-testid': 'logs-rank', 'aria-label': 'Rank', onchange: () => { rank = select.value; start(); } },
        h('option', { value: '' }, 'All ranks'),
        Array.from({ length: ranks }, (_, r) => h('option', { value: String(r) }, `Rank ${r}`)));
    const status = h('span', { class: 'muted', 'data-testid': 'logs-status', 'aria-live': 'polite' });
    const jump = h('button', { type: 'button', hidden: true, 'data-testid': 'logs-jump', onclick: () => { stick = true; toEnd(); } }, 'Jump to the end');
    const pre = h('pre', { class: 'logs', 'data-testid': 'logs', tabindex: '0', 'aria-label': 'Log output', dataset: { lines: '0', autoscroll: 'on' } });
    pre.addEventListener('scroll', () => {
        stick = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - AT_END_PX;
        jump.hidden = stick;
        pre.dataset.autoscroll = stick ? 'on' : 'off';
    });
    replace(box, h('div', { class: 'chart-toolbar' }, select, jump, status), pre);
    signal.addEventListener('abort', stop);
    start();
    return { stop };

    function stop() {
        gen++;
        clearTimeout(retry);
        if (ctrl) ctrl.abort();
        ctrl = null;
    }

    function toEnd() {
        pre.scrollTop = pre.scrollHeight;
        jump.hidden = true;
        pre.dataset.autoscroll = 'on';
    }

    function add(node) {
        pre.appendChild(node);
        if (++lines > MAX_LINES) { pre.firstChild.remove(); lines--; }
        pre.dataset.lines = String(lines);
        if (stick) toEnd();
    }

    function onEvent(msg) {
        if (msg.type === 'log') { add(document.createTextNode(`${msg.data}\n`)); return; }
        let d = {};
        try { d = JSON.parse(msg.data); } catch { return; }
        if (msg.type === 'end') {
            add(h('span', { class: 'log-end', 'data-testid': 'logs-end' }, `— rank ${d.rank} (generation ${d.generation}) ended: ${d.reason}\n`));
        } else if (msg.type === 'done') {
            status.dataset.state = d.state || '';
            replace(status, `The job ${d.state || 'ended'}: nothing more will be written.`);
        }
    }

    async function start() {
        stop();
        const mine = ++gen;
        pre.replaceChildren();
        lines = 0;
        pre.dataset.lines = '0';
        stick = true;
        status.dataset.state = '';
        replace(status, 'Following…');
        ctrl = new AbortController();
        const q = new URLSearchParams({ follow: '1', tail: String(TAIL) });
        if (rank !== '') q.set('rank', rank);
        let done = false;
        try {
            const res = await fetch(`${jobPath(id)}/logs?${q}`, {
                headers: { Authorization: `Bearer ${session.token()}`, Accept: 'text/event-stream' },
                cache: 'no-store', signal: ctrl.signal,
            });
            if (mine !== gen) return;
            if (res.status === 404) { replace(box, notice('info', 'This job has no logs.', 'logs-none')); return; }
            if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
            const parser = new SseParser((msg) => {
                if (mine !== gen) return;
                if (msg.type === 'done') done = true;
                onEvent(msg);
            });
            const decoder = new TextDecoder();
            const reader = res.body.getReader();
            for (;;) {
                const { done: end, value } = await reader.read();
                if (end || mine !== gen) break;
                parser.feed(decoder.decode(value, { stream: true }));
            }
        } catch (e) {
            if (mine !== gen || signal.aborted) return;
            replace(status, `The log stream broke (${e.message}); reconnecting…`);
        }
        if (mine !== gen || done || signal.aborted) return;
        retry = setTimeout(() => { if (mine === gen) start(); }, RETRY_MS);
    }
}
