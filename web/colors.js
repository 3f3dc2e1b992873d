// Colours and canvas fill patterns shared by the charts. Colour never carries
// meaning alone: every chart has a legend, a tooltip and a table beside it.

// Job types (cluster timeline); anything else is drawn grey.
export const TYPE_COLORS = {
    placement: '#3f6fd1',
    training: '#d9822b',
    inference: '#2f9460',
    federated: '#8a56c2',
};
export const OTHER_TYPE_COLOR = '#7b8794';

export function typeColor(type) {
    return TYPE_COLORS[type] || OTHER_TYPE_COLOR;
}

// Devices of a plan, in order; reused cyclically beyond ten.
const DEVICE_COLORS = ['#3f6fd1', '#d9822b', '#2f9460', '#c2410c', '#8a56c2',
    '#0e7490', '#b4387a', '#6b7a1f', '#5b6b7d', '#a1602c'];

export function deviceColor(i) {
    return DEVICE_COLORS[((i % DEVICE_COLORS.length) + DEVICE_COLORS.length) % DEVICE_COLORS.length];
}

// "#rrggbb" mixed towards black (amount > 0) or white (amount < 0).
export function shade(hex, amount) {
    const n = parseInt(hex.slice(1), 16);
    const ch = [(n >> 16) & 255, (n >> 8) & 255, n & 255].map((c) => {
        const v = amount >= 0 ? c * (1 - amount) : c + (255 - c) * -amount;
        return Math.round(Math.max(0, Math.min(255, v)));
    });
    return `rgb(${ch[0]}, ${ch[1]}, ${ch[2]})`;
}

// Tenant fill patterns, drawn over the job type's colour. The first is plain
// (the viewer's own tenant for members); they repeat beyond eight tenants.
export const PATTERNS = ['solid', 'diagonal', 'dots', 'cross', 'vertical', 'back-diagonal', 'horizontal', 'grid'];

// A CanvasPattern of light strokes for ctx (null for 'solid'). scale is the
// canvas's device pixel ratio, so patterns look the same on every screen.
export function makePattern(ctx, name, scale = 1) {
    if (name === 'solid') return null;
    const s = Math.max(1, Math.round(8 * scale));
    const c = document.createElement('canvas');
    c.width = s;
    c.height = s;
    const g = c.getContext('2d');
    g.strokeStyle = 'rgba(255, 255, 255, 0.75)';
    g.fillStyle = 'rgba(255, 255, 255, 0.8)';
    g.lineWidth = Math.max(1, 1.6 * scale);
    const line = (x0, y0, x1, y1) => { g.beginPath(); g.moveTo(x0, y0); g.lineTo(x1, y1); g.stroke(); };
    switch (name) {
    case 'diagonal': line(0, s, s, 0); line(-s / 2, s / 2, s / 2, -s / 2); line(s / 2, s * 1.5, s * 1.5, s / 2); break;
    case 'back-diagonal': line(0, 0, s, s); line(-s / 2, s / 2, s / 2, s * 1.5); line(s / 2, -s / 2, s * 1.5, s / 2); break;
    case 'dots': g.beginPath(); g.arc(s / 2, s / 2, s / 5, 0, Math.PI * 2); g.fill(); break;
    case 'cross': line(0, s, s, 0); line(0, 0, s, s); break;
    case 'vertical': line(s / 2, 0, s / 2, s); break;
    case 'horizontal': line(0, s / 2, s, s / 2); break;
    case 'grid': line(s / 2, 0, s / 2, s); line(0, s / 2, s, s / 2); break;
    default: return null;
    }
    return ctx.createPattern(c, 'repeat');
}

// A small legend swatch: a <canvas> filled with colour and pattern.
export function swatch(color, pattern = 'solid', label = '') {
    const w = 26, hgt = 14;
    const scale = window.devicePixelRatio || 1;
    const c = document.createElement('canvas');
    c.width = Math.round(w * scale);
    c.height = Math.round(hgt * scale);
    c.className = 'swatch';
    c.style.width = `${w}px`;
    c.style.height = `${hgt}px`;
    c.setAttribute('aria-hidden', 'true');
    if (label) c.title = label;
    const g = c.getContext('2d');
    if (!g) return c;
    g.fillStyle = color;
    g.fillRect(0, 0, c.width, c.height);
    const p = makePattern(g, pattern, scale);
    if (p) { g.fillStyle = p; g.fillRect(0, 0, c.width, c.height); }
    return c;
}
