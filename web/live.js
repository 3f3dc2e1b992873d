// Live job events from GET /v1/events (Server-Sent Events).
//
// EventSource cannot send an Authorization header, so the stream is read with
// fetch(): response.body is a ReadableStream of bytes, decoded with a
// streaming TextDecoder (multi-byte characters may straddle chunks) and fed
// to SseParser, which implements the event-stream format of the HTML
// standard: lines end in CRLF, LF or CR (a CR at the end of one chunk and an
// LF at the start of the next are one line end), a blank line dispatches,
// ":" starts a comment (the server's keepalives), "data" lines are joined
// with "\n", one space after the colon is dropped.
//
// LiveStream keeps the connection up: when it drops (network error, server
// closes, non-2xx, or no byte for WATCHDOG_MS although the server sends a
// keepalive every 15 s) it reconnects after an exponential backoff with
// jitter (0.25-0.5 s, doubling up to 7.5-15 s), reset once a connection has stayed up
// for 5 s (a server that accepts and drops at once is not hammered). Every
// successful (re)connect emits 'open'; pages answer it by refetching what they
// show, because the stream has no replay (no Last-Event-ID) and events sent
// while disconnected are lost. A 401 stops the stream and calls onAuthError.

export class SseParser {
    // onMessage({type, data, id}) is called once per dispatched event.
    constructor(onMessage, onRetry = () => {}) {
        this.onMessage = onMessage;
        this.onRetry = onRetry;
        this.buf = '';
        this.afterCR = false; // last chunk ended in CR: skip a leading LF
        this.reset();
        this.lastId = '';
    }

    reset() {
        this.type = '';
        this.data = [];
    }

    feed(text) {
        if (text === '') return;
        if (this.afterCR && text.startsWith('\n')) text = text.slice(1);
        this.afterCR = false;
        const buf = this.buf + text;
        const eol = /\r\n|\r|\n/g;
        let start = 0, m;
        while ((m = eol.exec(buf)) !== null) {
            // A CR as the very last character might be the first half of CRLF.
            if (m[0] === '\r' && m.index === buf.length - 1) this.afterCR = true;
            this.line(buf.slice(start, m.index));
            start = eol.lastIndex;
        }
        this.buf = buf.slice(start);
    }

    line(line) {
        if (line === '') return this.dispatch();
        if (line[0] === ':') return; // comment, e.g. ":keepalive"
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? '' : line.slice(colon + 1);
        if (value[0] === ' ') value = value.slice(1);
        switch (field) {
        case 'event': this.type = value; break;
        case 'data': this.data.push(value); break;
        case 'id': if (!value.includes('\0')) this.lastId = value; break;
        case 'retry': if (/^\d+$/.test(value)) this.onRetry(Number(value)); break;
        default: break; // unknown fields are ignored
        }
    }

    dispatch() {
        if (this.data.length === 0) { this.reset(); return; }
        const msg = { type: this.type || 'message', data: this.data.join('\n'), id: this.lastId };
        this.reset();
        this.onMessage(msg);
    }
}

const WATCHDOG_MS = 45000;
const BACKOFF_MIN_MS = 500;
const BACKOFF_MAX_MS = 15000;
const STABLE_MS = 5000;

export class LiveStream {
    // url: '/v1/events'; getToken(): bearer token; onAuthError(): on 401.
    constructor({ url, getToken, onAuthError }) {
        this.url = url;
        this.getToken = getToken;
        this.onAuthError = onAuthError || (() => {});
        this.listeners = new Map(); // type -> Set(fn)
        this.state = 'idle'; // idle | connecting | open | down
        this.detail = '';
        this.running = false;
        this.gen = 0; // bumped by start(): an older loop still winding down exits
        this.ctrl = null;
        this.wake = null;
        this.retryHint = 0;
    }

    // on('job' | 'open' | 'state', fn) -> unsubscribe function.
    on(type, fn) {
        if (!this.listeners.has(type)) this.listeners.set(type, new Set());
        this.listeners.get(type).add(fn);
        return () => this.listeners.get(type).delete(fn);
    }

    emit(type, arg) {
        for (const fn of [...(this.listeners.get(type) || [])]) {
            try { fn(arg); } catch (e) { console.error('live listener failed', e); }
        }
    }

    setState(state, detail = '') {
        this.state = state;
        this.detail = detail;
        this.emit('state', { state, detail });
    }

    start() {
        if (this.running) return;
        this.running = true;
        this.loop(++this.gen);
    }

    stop() {
        this.running = false;
        if (this.ctrl) this.ctrl.abort();
        if (this.wake) this.wake();
        this.setState('idle');
    }

    async loop(gen) {
        const alive = () => this.running && this.gen === gen;
        let attempt = 0;
        while (alive()) {
            this.setState(attempt === 0 ? 'connecting' : 'down', this.detail);
            let why = '', openedAt = 0;
            try {
                why = await this.connectOnce(() => { openedAt = Date.now(); });
            } catch (e) {
                why = e && e.message ? e.message : String(e);
            }
            if (!alive()) return;
            // A connection that stayed up a while resets the backoff; one the
            // server drops at once keeps backing off.
            attempt = openedAt && Date.now() - openedAt > STABLE_MS ? 1 : attempt + 1;
            const base = Math.min(BACKOFF_MAX_MS, Math.max(this.retryHint, BACKOFF_MIN_MS * 2 ** (attempt - 1)));
            const delay = Math.round(base * (0.5 + Math.random() * 0.5));
            this.setState('down', why);
            await new Promise((resolve) => {
                const t = setTimeout(resolve, delay);
                this.wake = () => { clearTimeout(t); resolve(); };
            });
            this.wake = null;
        }
    }

    // One connection; resolves with the reason it ended.
    async connectOnce(onOpen) {
        const ctrl = new AbortController();
        this.ctrl = ctrl;
        let watchdog = null;
        const arm = () => {
            clearTimeout(watchdog);
            watchdog = setTimeout(() => ctrl.abort(new Error('no data from the server for 45 s')), WATCHDOG_MS);
        };
        try {
            arm();
            const res = await fetch(this.url, {
                headers: { Authorization: `Bearer ${this.getToken()}`, Accept: 'text/event-stream' },
                cache: 'no-store',
                signal: ctrl.signal,
            });
            if (res.status === 401) {
                this.running = false;
                this.setState('idle');
                this.onAuthError();
                return 'unauthorized';
            }
            if (!res.ok || !res.body) return `HTTP ${res.status}`;
            const ctype = res.headers.get('Content-Type') || '';
            if (!ctype.startsWith('text/event-stream')) return `unexpected content type "${ctype}"`;

            onOpen();
            this.setState('open');
            this.emit('open');
            const parser = new SseParser((msg) => this.message(msg), (ms) => { this.retryHint = ms; });
            const decoder = new TextDecoder();
            const reader = res.body.getReader();
            for (;;) {
                const { done, value } = await reader.read();
                if (done) break;
                arm();
                parser.feed(decoder.decode(value, { stream: true }));
            }
            parser.feed(decoder.decode());
            return 'the server closed the stream';
        } catch (e) {
            if (ctrl.signal.aborted && ctrl.signal.reason instanceof Error) return ctrl.signal.reason.message;
            return e && e.message ? e.message : String(e);
        } finally {
            clearTimeout(watchdog);
            ctrl.abort();
        }
    }

    // "event: job" per the API; a bare "message" carrying a job_id is taken too.
    message(msg) {
        if (msg.type !== 'job' && msg.type !== 'message') return;
        let ev;
        try { ev = JSON.parse(msg.data); } catch { console.warn('live: bad event data', msg.data); return; }
        if (ev && typeof ev.job_id === 'string') this.emit('job', ev);
    }
}
