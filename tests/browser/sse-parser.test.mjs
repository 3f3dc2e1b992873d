// Unit test of the dashboard's event-stream code (web/live.js) in plain node:
//   node tests/browser/sse-parser.test.mjs
// Prints "ok N checks" or the failing check and exits 1.
import fs from 'node:fs';
import assert from 'node:assert/strict';

// Loaded by source, as the browser gets it (web/live.js imports nothing).
const src = fs.readFileSync(new URL('../../web/live.js', import.meta.url), 'utf8');
const { SseParser, LiveStream } = await import(`data:text/javascript,${encodeURIComponent(src)}`);

let checks = 0;
async function check(name, fn) {
    try {
        await fn();
    } catch (e) {
        console.log(`FAIL: ${name}: ${e.message}`);
        process.exit(1);
    }
    checks++;
}

function parse(chunks) {
    const out = [];
    const p = new SseParser((m) => out.push(m));
    for (const c of chunks) p.feed(c);
    return out;
}

const JOB = 'event: job\ndata: {"job_id":"j_1","state":"running"}\n\n';

await check('one event, LF line ends', () => {
    assert.deepEqual(parse([JOB]), [{ type: 'job', data: '{"job_id":"j_1","state":"running"}', id: '' }]);
});
await check('CRLF and CR line ends', () => {
    assert.equal(parse([JOB.replaceAll('\n', '\r\n')]).length, 1);
    assert.equal(parse([JOB.replaceAll('\n', '\r')]).length, 1);
});
await check('split at every position, every line-end style', () => {
    for (const eol of ['\n', '\r\n', '\r']) {
        const text = (JOB + ':keepalive\n\n' + JOB).replaceAll('\n', eol);
        for (let i = 0; i <= text.length; i++) {
            const got = parse([text.slice(0, i), text.slice(i)]);
            assert.equal(got.length, 2, `eol ${JSON.stringify(eol)} split at ${i}: ${got.length} events`);
            assert.equal(got[1].data, '{"job_id":"j_1","state":"running"}');
        }
        const oneByOne = parse([...text]);
        assert.equal(oneByOne.length, 2);
    }
});
await check('CR at the end of a chunk and LF at the start of the next are one line end', () => {
    const got = parse(['data: a\r', '\ndata: b\r', '\n\r', '\n']);
    assert.deepEqual(got.map((m) => m.data), ['a\nb']);
});
await check('comments and keepalives dispatch nothing', () => {
    assert.deepEqual(parse([':keepalive\n\n:keepalive\n\n']), []);
});
await check('multi-line data is joined with LF; one leading space dropped', () => {
    const got = parse(['data:x\ndata:  y\ndata\n\n']);
    assert.equal(got[0].data, 'x\n y\n');
    assert.equal(got[0].type, 'message');
});
await check('event without data is not dispatched, type resets', () => {
    const got = parse(['event: job\n\ndata: z\n\n']);
    assert.deepEqual(got, [{ type: 'message', data: 'z', id: '' }]);
});
await check('unknown fields ignored; id and retry understood', () => {
    let retry = 0;
    const out = [];
    const p = new SseParser((m) => out.push(m), (ms) => { retry = ms; });
    p.feed('foo: bar\nid: 7\nretry: 2500\nretry: soon\ndata: d\n\n');
    assert.deepEqual(out, [{ type: 'message', data: 'd', id: '7' }]);
    assert.equal(retry, 2500);
});
await check('an unterminated event is not dispatched', () => {
    assert.deepEqual(parse(['event: job\ndata: {"job_id":"j_1"}\n']), []);
});
await check('multi-byte UTF-8 split across byte chunks', () => {
    const bytes = new TextEncoder().encode('data: {"reason":"µs → ok ✓"}\n\n');
    for (let i = 0; i <= bytes.length; i++) {
        const dec = new TextDecoder();
        const out = [];
        const p = new SseParser((m) => out.push(m));
        p.feed(dec.decode(bytes.slice(0, i), { stream: true }));
        p.feed(dec.decode(bytes.slice(i), { stream: true }));
        p.feed(dec.decode());
        assert.equal(out.length, 1);
        assert.equal(JSON.parse(out[0].data).reason, 'µs → ok ✓');
    }
});

// LiveStream against a fake fetch: a stream that sends one event and ends,
// then a reconnect that is refused with 401.
await check('LiveStream: events, reconnect after the stream ends, stop on 401', async () => {
    const calls = [];
    const enc = new TextEncoder();
    globalThis.fetch = async (url, init) => {
        calls.push(init.headers.Authorization);
        if (calls.length === 1) {
            const body = new ReadableStream({
                start(c) {
                    c.enqueue(enc.encode(':keepalive\n\nevent: job\ndata: {"job_id":"j_9",'));
                    c.enqueue(enc.encode('"state":"succeeded"}\n\nevent: other\ndata: {}\n\n'));
                    c.close();
                },
            });
            return new Response(body, { status: 200, headers: { 'Content-Type': 'text/event-stream' } });
        }
        return new Response('{"error":{}}', { status: 401, headers: { 'Content-Type': 'application/json' } });
    };
    const states = [], jobs = [];
    let opens = 0;
    const live = new LiveStream({ url: '/v1/events', getToken: () => 'tok' });
    const authError = new Promise((resolve) => { live.onAuthError = resolve; });
    live.on('state', (s) => states.push(s.state));
    live.on('open', () => opens++);
    live.on('job', (e) => jobs.push(e));
    live.start();
    let timer;
    await Promise.race([authError, new Promise((_, rej) => { timer = setTimeout(() => rej(new Error('no 401 handling within 5 s')), 5000); })]);
    clearTimeout(timer);
    assert.deepEqual(calls, ['Bearer tok', 'Bearer tok']);
    assert.deepEqual(jobs, [{ job_id: 'j_9', state: 'succeeded' }]);
    assert.equal(opens, 1);
    assert.deepEqual(states.slice(0, 3), ['connecting', 'open', 'down']);
    assert.equal(live.running, false);
});

console.log(`ok ${checks} checks`);
