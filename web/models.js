// Models (#/models, #/models/<name>): the tenant's model registry. The list
// page shows every model (GET /v1/models) with, for each, its aliases and its
// versions (GET /v1/models/{name}: format, size, SHA-256 prefix, created,
// description, the training job that made it); #/models/<name> shows one
// model only. What is shown is what the API says; an absent value is "—".
// Fetched on mount and again when the page is opened; the registry changes
// only by upload or alias moves, which do not arrive as live events.
import { api, ApiError } from './api.js';
import { h, replace, notice } from './dom.js';
import { fmtBytes, timeEl } from './format.js';

const SHA_PREFIX = 12;

export const modelPath = (name) => `/v1/models/${encodeURIComponent(name)}`;
export const modelHref = (name) => `#/models/${encodeURIComponent(name)}`;

export function mount(root, { params, signal }) {
    const only = params[0]; // one model, or all of them
    const status = h('div', { class: 'status-area', 'aria-live': 'polite' });
    const body = h('div', { 'data-testid': 'models' });
    replace(root,
        only ? h('p', { class: 'crumbs' }, h('a', { href: '#/models' }, '← Models')) : null,
        h('div', { class: 'page-head' }, h('h1', {}, only ? `Model ${only}` : 'Models')),
        status, body);
    replace(status, notice('loading', 'Loading models…', 'models-loading'));
    load();

    async function load() {
        try {
            const names = only ? [only] : ((await api('/v1/models', { signal })).models || []).map((m) => m.name);
            const models = await Promise.all(names.map((n) => api(modelPath(n), { signal })));
            replace(status);
            if (!models.length) {
                replace(body, h('p', { class: 'empty', 'data-testid': 'models-empty' },
                    'No models yet: upload one (POST /v1/models/{name}/versions, or gantry models upload), or train one.'));
                return;
            }
            replace(body, models.map(modelSection));
        } catch (e) {
            if (signal.aborted) return;
            const text = e instanceof ApiError && e.status === 404 ? `No model ${only} in your tenant.` :
                `Could not load models: ${e instanceof ApiError ? e.describe() : e.message}`;
            replace(status, notice('error', text, 'models-error'));
        }
    }
}

// One model: a heading linking to its page, its aliases, a row per version.
function modelSection(m) {
    const versions = Array.isArray(m.versions) ? m.versions : [];
    const aliases = m.aliases && typeof m.aliases === 'object' ? Object.entries(m.aliases) : [];
    const aliasesOf = (v) => aliases.filter(([, to]) => to === v).map(([a]) => a);
    return h('section', { class: 'model', 'data-testid': 'model', dataset: { model: m.name } },
        h('h2', {}, h('a', { href: modelHref(m.name), class: 'mono' }, m.name)),
        h('p', { 'data-testid': 'model-aliases' }, 'Aliases: ', aliases.length ?
            aliases.map(([a, v]) => h('span', { class: 'chip', 'data-testid': 'model-alias', dataset: { alias: a, version: String(v) } },
                `${a} → v${v}`)) : h('span', { class: 'muted' }, 'none')),
        h('div', { class: 'table-scroll' }, h('table', { class: 'grid model-versions', 'data-testid': 'model-versions' },
            h('caption', { class: 'visually-hidden' }, `Versions of ${m.name}, newest first`),
            h('thead', {}, h('tr', {}, ['Version', 'Format', 'Size', 'SHA-256', 'Aliases', 'Created', 'Description', 'Made by']
                .map((t) => h('th', { scope: 'col' }, t)))),
            h('tbody', {}, versions.map((v) => h('tr', {
                'data-testid': 'model-version',
                dataset: { version: String(v.version), format: v.format || '', bytes: typeof v.size_bytes === 'number' ? String(v.size_bytes) : '', sha256: v.sha256 || '' },
            },
                h('td', { class: 'num' }, `v${v.version}`),
                h('td', { 'data-testid': 'version-format' }, v.format || '—'),
                h('td', { class: 'num', 'data-testid': 'version-size', title: typeof v.size_bytes === 'number' ? `${v.size_bytes} bytes` : undefined },
                    typeof v.size_bytes === 'number' ? fmtBytes(v.size_bytes) : '—'),
                h('td', { class: 'mono', 'data-testid': 'version-sha256', title: v.sha256 || undefined },
                    v.sha256 ? v.sha256.slice(0, SHA_PREFIX) : '—'),
                h('td', {}, aliasesOf(v.version).map((a) => h('span', { class: 'chip' }, a))),
                h('td', { class: 'time' }, timeEl(v.created_at)),
                h('td', { class: 'name', 'data-testid': 'version-description' }, v.description || h('span', { class: 'muted' }, '—')),
                h('td', {}, v.job_id ? h('a', { href: `#/jobs/${encodeURIComponent(v.job_id)}`, class: 'mono' }, v.job_id) : 'upload')))))));
}
