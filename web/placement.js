// Tables of a placement result shared by the job page and the plan page:
// the candidates (one row per algorithm tried) and the chosen plan's devices.
import { h } from './dom.js';
import { bar, fmtBytes, fmtMicros, fmtMillis, fmtPct } from './format.js';

const num = (v) => typeof v === 'number' && Number.isFinite(v);

// r: placement result; devices: [{name, memory_bytes?}] in device order.
// Peak memory gets one column per device up to six devices, a list beyond.
export function candidatesTable(r, devices) {
    const candidates = Array.isArray(r.candidates) ? r.candidates : [];
    const nDev = Math.max(devices.length, ...candidates.map((c) => (Array.isArray(c.peak_bytes) ? c.peak_bytes.length : 0)));
    const perColumn = nDev <= 6;
    const names = Array.from({ length: nDev }, (_, i) => (devices[i] && devices[i].name) || `device ${i}`);
    const caps = Array.from({ length: nDev }, (_, i) => (devices[i] && num(devices[i].memory_bytes) ? devices[i].memory_bytes : null));
    const withRatio = candidates.some((c) => num(c.makespan_over_lower_bound));
    const withTransfers = candidates.some((c) => num(c.transfers));
    const span = perColumn && nDev ? 2 : 1;

    const peakText = (b, i) => {
        if (!num(b)) return '—';
        return caps[i] ? `${fmtBytes(b)} (${fmtPct(b / caps[i])})` : fmtBytes(b);
    };
    const peakCells = (c) => {
        const pk = Array.isArray(c.peak_bytes) ? c.peak_bytes : [];
        if (perColumn) {
            return names.map((_, i) => h('td', {
                class: `num${num(pk[i]) && caps[i] && pk[i] > caps[i] ? ' error-text' : ''}`,
                title: num(pk[i]) ? `${pk[i]} bytes${caps[i] ? ` of ${caps[i]}` : ''}` : '',
            }, peakText(pk[i], i)));
        }
        return [h('td', { class: 'num' }, pk.map((b, i) => `${names[i]} ${peakText(b, i)}`).join(' · ') || '—')];
    };

    return h('table', { class: 'grid candidates', 'data-testid': 'candidates' },
        h('caption', { class: 'visually-hidden' }, 'Placement candidates by algorithm; the best is marked'),
        h('thead', {},
            h('tr', {},
                h('th', { scope: 'col', rowspan: span }, 'Algorithm'),
                h('th', { scope: 'col', rowspan: span, title: 'the graph variant of its best plan: plain, fuse, coplace, coplace+fuse' }, 'Variant'),
                h('th', { scope: 'col', rowspan: span }, 'Feasible'),
                h('th', { scope: 'col', rowspan: span, class: 'num' }, 'Placement time'),
                h('th', { scope: 'col', rowspan: span, class: 'num' }, 'Makespan'),
                withRatio ? h('th', { scope: 'col', rowspan: span, class: 'num', title: 'makespan divided by the lower bound max(critical path, total work / devices)' }, 'Makespan / lower bound') : null,
                withTransfers ? h('th', { scope: 'col', rowspan: span, class: 'num' }, 'Transfers') : null,
                nDev ? h('th', { scope: 'colgroup', colspan: perColumn ? nDev : 1, class: 'num' }, 'Peak memory per device') : null,
                h('th', { scope: 'col', rowspan: span }, 'Note')),
            perColumn && nDev ? h('tr', {}, names.map((n) => h('th', { scope: 'col', class: 'num mono' }, n))) : null),
        h('tbody', {}, candidates.map((c) => {
            const best = c.algorithm === r.best;
            return h('tr', {
                'data-testid': 'candidate-row', dataset: { algorithm: c.algorithm || '', best: best ? 'true' : 'false' },
                class: best ? 'best-row' : '',
            },
            h('th', { scope: 'row', class: 'mono' }, c.algorithm || '—', best ? h('span', { class: 'tag' }, 'best') : null),
            h('td', { class: 'mono' }, c.variant || '—'),
            h('td', {}, c.feasible === true ? 'yes' : c.feasible === false ? h('span', { class: 'error-text' }, 'no') : '—'),
            h('td', { class: 'num' }, fmtMillis(c.placement_ms)),
            h('td', { class: 'num' }, fmtMicros(c.makespan_us)),
            withRatio ? h('td', { class: 'num' }, num(c.makespan_over_lower_bound) ? `${c.makespan_over_lower_bound.toFixed(2)}×` : '—') : null,
            withTransfers ? h('td', { class: 'num' }, num(c.transfers) ? String(c.transfers) : '—') : null,
            nDev ? peakCells(c) : null,
            h('td', { class: 'note' }, c.reason || ''));
        })));
}

// One row per device of the plan: peak memory against capacity (a bar, red
// above 100 %), busy time, op count. specDevices fills in missing capacities.
export function devicesTable(planDevices, specDevices = []) {
    return h('table', { class: 'grid devices', 'data-testid': 'device-bars' },
        h('caption', { class: 'visually-hidden' }, 'Peak memory against capacity per device'),
        h('thead', {}, h('tr', {}, ['Device', 'Peak memory / capacity', 'Busy', 'Ops']
            .map((t, i) => h('th', { scope: 'col', class: i >= 2 ? 'num' : '' }, t)))),
        h('tbody', {}, planDevices.map((d, i) => {
            const cap = num(d.memory_bytes) ? d.memory_bytes :
                specDevices[i] && num(specDevices[i].memory_bytes) ? specDevices[i].memory_bytes : null;
            const peak = num(d.peak_bytes) ? d.peak_bytes : null;
            const frac = cap && peak !== null ? peak / cap : null;
            const label = peak === null ? '—' : cap ? `${fmtBytes(peak)} of ${fmtBytes(cap)} (${fmtPct(frac)})` : fmtBytes(peak);
            const ops = Array.isArray(d.ops) ? d.ops.length : num(d.ops) ? d.ops : null;
            const opTitle = Array.isArray(d.ops) ? d.ops.slice(0, 40).join(', ') + (d.ops.length > 40 ? ', …' : '') : '';
            return h('tr', { 'data-testid': 'device-bar', dataset: { device: d.name || '' } },
                h('th', { scope: 'row', class: 'mono' }, d.name || `device ${i}`),
                h('td', { class: 'wide-bar' }, bar(frac, label, { over: frac !== null && frac > 1, title: `${peak ?? '?'} of ${cap ?? '?'} bytes` })),
                h('td', { class: 'num' }, fmtMicros(d.busy_us)),
                h('td', { class: 'num', title: opTitle }, ops === null ? '—' : String(ops)));
        })));
}
