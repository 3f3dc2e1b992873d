// The output files of a program job (result.outputs.files: path, bytes,
// sha256) as a table with a download button per file. A plain link cannot
// carry the bearer token, so a download is GET /v1/jobs/{id}/outputs/{path}
// with fetch, saved through an object URL and an <a download>.
import { session, jobPath, ApiError } from './api.js';
import { h, replace } from './dom.js';
import { fmtBytes } from './format.js';

export function outputsPath(id, path) {
    return `${jobPath(id)}/outputs/${String(path).split('/').map(encodeURIComponent).join('/')}`;
}

async function download(id, path, err) {
    replace(err);
    try {
        const res = await fetch(outputsPath(id, path), { headers: { Authorization: `Bearer ${session.token()}` }, cache: 'no-store' });
        if (!res.ok) {
            let msg = res.statusText;
            try { msg = (await res.json()).error.message; } catch { /* not JSON */ }
            throw new ApiError(res.status, '', msg);
        }
        const url = URL.createObjectURL(await res.blob());
        const a = h('a', { href: url, download: String(path).split('/').pop(), hidden: true });
        document.body.appendChild(a);
        a.click();
        a.remove();
        setTimeout(() => URL.revokeObjectURL(url), 60000);
    } catch (e) {
        replace(err, `Download failed: ${e instanceof ApiError ? e.describe() : e.message}`);
    }
}

export function outputsTable(id, files) {
    const err = h('p', { class: 'inline-error', role: 'alert', 'data-testid': 'outputs-error' });
    if (!files.length) return h('div', {}, h('h3', {}, 'Output files'), h('p', { class: 'muted', 'data-testid': 'outputs-empty' }, 'The job wrote no files.'));
    return h('div', { 'data-testid': 'outputs' },
        h('h3', {}, `Output files (${files.length})`),
        h('div', { class: 'table-scroll' }, h('table', { class: 'grid' },
            h('thead', {}, h('tr', {}, ['File', 'Size', 'SHA-256', ''].map((t) => h('th', { scope: 'col' }, t)))),
            h('tbody', {}, files.map((f) => h('tr', { 'data-testid': 'output-row', dataset: { path: String(f.path) } },
                h('td', { class: 'mono' }, String(f.path)),
                h('td', { class: 'num' }, typeof f.bytes === 'number' ? fmtBytes(f.bytes) : ''),
                h('td', { class: 'mono muted', title: String(f.sha256 || '') }, String(f.sha256 || '').slice(0, 16)),
                h('td', {}, h('button', { type: 'button', 'data-testid': 'output-download', onclick: () => download(id, f.path, err) }, 'Download'))))))),
        err);
}
