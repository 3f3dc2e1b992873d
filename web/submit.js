// Submit: POST /v1/jobs with a JSON spec typed by hand. The server validates;
// its error message and field are shown as they come.
import { api, ApiError, randomKey } from './api.js';
import { h, replace, notice } from './dom.js';
import { TYPES, PRIORITIES, prettyJson } from './format.js';

// A tiny placement job: two ops on one device.
const PLACEMENT_EXAMPLE = {
    graph: {
        ops: [
            { name: 'a', compute_us: 10, output_bytes: [100] },
            { name: 'b', compute_us: 20, output_bytes: [100] },
        ],
        edges: [{ src: 'a', dst: 'b', bytes: 100 }],
        devices: [{ name: 'd0', memory_bytes: 1000000 }],
        comm: { latency_us: 1, bytes_per_us: 100 },
    },
};
const TEMPLATES = { placement: prettyJson(PLACEMENT_EXAMPLE) };
const EMPTY_SPEC = '{\n}';

export function mount(root, { me, navigate, signal }) {
    if (me.role === 'viewer') {
        replace(root, h('h1', {}, 'Submit a job'),
            notice('info', 'Your role is viewer: viewers can look at jobs but not submit them.', 'submit-forbidden'));
        return null;
    }

    const type = h('select', { id: 's-type', name: 'type', 'data-testid': 'submit-type' },
        TYPES.map((t) => h('option', { value: t, selected: t === 'placement' }, t)));
    const name = h('input', { id: 's-name', name: 'name', type: 'text', value: 'placement-example', maxlength: '200', 'data-testid': 'submit-name', autocomplete: 'off' });
    const priority = h('select', { id: 's-priority', name: 'priority', 'data-testid': 'submit-priority' },
        PRIORITIES.map((p) => h('option', { value: p, selected: p === 'normal' }, p)));
    const spec = h('textarea', {
        id: 's-spec', name: 'spec', rows: '18', spellcheck: 'false', 'data-testid': 'submit-spec',
        'aria-describedby': 's-spec-help', class: 'mono',
    });
    spec.value = TEMPLATES.placement;
    const specHelp = h('p', { id: 's-spec-help', class: 'help' });
    const button = h('button', { type: 'submit', class: 'primary', 'data-testid': 'submit' }, 'Submit job');
    const result = h('div', { class: 'status-area' });

    const fields = { type, name, priority, spec };
    let lastTemplate = spec.value;  // replaced on type change only while untouched
    let retry = null;               // {body, key} of an attempt that got no answer

    const helpFor = (t) => (t === 'placement' ?
        'spec.graph: ops, edges, devices, comm (times in µs, sizes in bytes). Prefilled with a tiny example.' :
        `Write the ${t} spec as JSON; deploy/examples/${t}.json holds a working one.`);
    specHelp.textContent = helpFor('placement');

    type.addEventListener('change', () => {
        if (spec.value === lastTemplate) {
            spec.value = TEMPLATES[type.value] || EMPTY_SPEC;
            lastTemplate = spec.value;
        }
        if (/-example$/.test(name.value)) name.value = `${type.value}-example`;
        specHelp.textContent = helpFor(type.value);
    });

    const form = h('form', { class: 'submit card', novalidate: true },
        h('div', { class: 'grid-form' },
            h('label', { for: 's-type' }, 'Type'), type,
            h('label', { for: 's-name' }, 'Name'), name,
            h('label', { for: 's-priority' }, 'Priority'), priority,
            h('label', { for: 's-spec' }, 'Spec (JSON)'), h('div', {}, spec, specHelp)),
        result,
        h('div', { class: 'actions' }, button));

    form.addEventListener('submit', async (ev) => {
        ev.preventDefault();
        for (const f of Object.values(fields)) f.removeAttribute('aria-invalid');
        let parsed;
        try {
            parsed = JSON.parse(spec.value);
        } catch (e) {
            return showError(`The spec is not valid JSON: ${e.message}`, 'spec');
        }
        const body = JSON.stringify({ type: type.value, name: name.value.trim(), priority: priority.value, spec: parsed });
        // Same body after a request that got no answer: same Idempotency-Key,
        // so the job is not created twice if the first request did arrive.
        const key = retry && retry.body === body ? retry.key : randomKey();
        button.disabled = true;
        replace(result, notice('loading', 'Submitting…'));
        try {
            const job = await api('/v1/jobs', { method: 'POST', body, signal, headers: { 'Idempotency-Key': key } });
            retry = null;
            navigate(`#/jobs/${encodeURIComponent(job.id)}`);
        } catch (e) {
            if (signal.aborted) return;
            button.disabled = false;
            if (e instanceof ApiError && e.status === 0) retry = { body, key };
            else retry = null;
            if (e instanceof ApiError) showError(e.status === 0 ? `${e.message}; submitting again is safe.` : e.describe(), e.field);
            else showError(e.message, '');
        }
    });

    replace(root, h('div', { class: 'page-head' }, h('h1', {}, 'Submit a job')), form);
    return null;

    function showError(message, field) {
        const target = field ? fields[field.split(/[.[]/)[0]] : null;
        replace(result, h('div', { class: 'notice notice-error', role: 'alert', 'data-testid': 'submit-error' },
            h('p', {}, message),
            field ? h('p', {}, 'Field: ', h('code', { 'data-testid': 'submit-error-field' }, field)) : null));
        if (target) {
            target.setAttribute('aria-invalid', 'true');
            target.focus();
        }
    }
}
