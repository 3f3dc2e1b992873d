// DOM building without innerHTML: every piece of server data reaches the page
// as a text node or an attribute value, so nothing it contains is parsed as
// markup.

// Properties set as DOM properties rather than attributes.
const PROPS = new Set(['value', 'checked', 'disabled', 'hidden', 'open', 'selected', 'readOnly']);

// h('a', {href: '#/jobs', class: 'x', onclick: fn, dataset: {jobId}}, 'text', childNode, [more])
export function h(tag, props, ...children) {
    const el = document.createElement(tag);
    if (props) {
        for (const [k, v] of Object.entries(props)) {
            if (v === undefined || v === null || v === false) continue;
            if (k === 'class') el.className = v;
            else if (k === 'dataset') Object.assign(el.dataset, v);
            else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
            else if (PROPS.has(k)) el[k] = v;
            else el.setAttribute(k, v === true ? '' : String(v));
        }
    }
    append(el, children);
    return el;
}

// Appends strings (as text), numbers, nodes and nested arrays; skips null/false.
export function append(el, children) {
    for (const c of children) {
        if (c === undefined || c === null || c === false) continue;
        if (Array.isArray(c)) append(el, c);
        else if (c instanceof Node) el.appendChild(c);
        else el.appendChild(document.createTextNode(String(c)));
    }
    return el;
}

// Replaces all children of el.
export function replace(el, ...children) {
    el.replaceChildren();
    return append(el, children);
}

// A status line: kind is 'loading' | 'error' | 'info'.
export function notice(kind, text, testid) {
    return h('p', {
        class: `notice notice-${kind}`,
        role: kind === 'error' ? 'alert' : 'status',
        'data-testid': testid,
    }, text);
}

// Moves keyboard focus to the page's heading after navigation, so screen
// readers announce the new page.
export function focusHeading(root) {
    const h1 = root.querySelector('h1');
    if (h1) { h1.tabIndex = -1; h1.focus({ preventScroll: true }); }
}
