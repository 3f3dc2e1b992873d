// Unit test of the dashboard's chart data code in plain node (no server, no
// browser): the Gantt chart's lanes and culling (web/gantt.js), the step
// series alignment for uPlot (web/charts.js) and the axis labels
// (web/format.js, web/charts.js), and how metrics read (web/format.js).
//   node tests/browser/charts.test.mjs
// Prints "ok N checks" or the failing check and exits 1.
import assert from 'node:assert/strict';
import { buildLanes, firstReaching, barAt } from '../../web/gantt.js';
import { alignSteps, clockAxis, coveredFraction, BYTE_INCRS, CLOCK_INCRS } from '../../web/charts.js';
import { microsAxis, niceStep, fmtAccuracy, fmtLoss, fmtLatencyMs, fmtMetric } from '../../web/format.js';
import {
    series, latest, timeSplit, eventRows, configRows, configSeries, designRows, programX, programCharts, mergeByX, rankZero,
} from '../../web/curves.js';

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

await check('lanes: ops per device sorted by start, transfers on send and receive lanes', () => {
    const l = buildLanes({
        ops: [[0, 1, 50, 60], [1, 0, 0, 10], [2, 1, 5, 20], [3, 0, 20, 30]],
        transfers: [[0, 1, 10, 15, 100, 1], [1, 0, 20, 22, 5, 2]],
    }, 2);
    assert.equal(l.D, 2);
    assert.deepEqual([...l.ops[0].start], [0, 20]);
    assert.deepEqual([...l.ops[1].start], [5, 50]);
    assert.deepEqual([...l.ops[1].ref], [2, 0]);           // index into schedule.ops
    assert.deepEqual([...l.send[0].start], [10]);
    assert.deepEqual([...l.send[0].peer], [1]);
    assert.deepEqual([...l.recv[1].start], [10]);
    assert.deepEqual([...l.recv[1].peer], [0]);
    assert.deepEqual([...l.send[1].start], [20]);
    assert.equal(l.end, 60);
    assert.equal(l.nOps, 4);
    assert.equal(l.nX, 2);
    assert.equal(l.skipped, 0);
});

await check('lanes: malformed entries are skipped and counted, devices beyond the list added', () => {
    const l = buildLanes({
        ops: [[0, 0, 1, 2], [1, -1, 0, 1], [2, 0, 5, 3], 'x', [3, 0, null, 4], [4, 2, 0, 1]],
        transfers: [[0, 9999, 0, 1, 1, 0], [0, 1, 'a', 2, 1, 0]],
    }, 1);
    assert.equal(l.D, 3);         // device 2 appears in an op
    assert.equal(l.nOps, 2);
    assert.equal(l.nX, 0);
    assert.equal(l.skipped, 6);
});

await check('culling: first bar reaching a time, with a long early bar', () => {
    const l = buildLanes({ ops: [[0, 0, 0, 100], [1, 0, 10, 20], [2, 0, 30, 40], [3, 0, 150, 160]], transfers: [] }, 1).ops[0];
    assert.equal(firstReaching(l, 0), 0);
    assert.equal(firstReaching(l, 50), 0);   // the 0-100 bar still covers 50
    assert.equal(firstReaching(l, 120), 3);
    assert.equal(firstReaching(l, 1000), 4); // past the end
});

await check('culling: 10,000 sequential ops, a narrow window touches only its bars', () => {
    const ops = [];
    for (let i = 0; i < 10000; i++) ops.push([i, 0, i * 10, i * 10 + 8]);
    const l = buildLanes({ ops, transfers: [] }, 1).ops[0];
    const vs = 50000, ve = 50100;
    let n = 0;
    for (let i = firstReaching(l, vs); i < l.n && l.start[i] <= ve; i++) if (l.end[i] >= vs) n++;
    assert.equal(n, 11); // bar 4999 (49990-49998) ends before the window; 5000..5010 touch it
    assert.equal(firstReaching(l, vs), 5000);
});

await check('hit test: the bar under a time, the nearest within tolerance, none in a gap', () => {
    const l = buildLanes({ ops: [[0, 0, 0, 10], [1, 0, 20, 30]], transfers: [] }, 1).ops[0];
    assert.equal(barAt(l, 5, 0), 0);
    assert.equal(barAt(l, 25, 0), 1);
    assert.equal(barAt(l, 15, 1), -1);
    assert.equal(barAt(l, 11, 2), 0);
    assert.equal(barAt(l, 19, 2), 1);
    assert.equal(barAt(l, -5, 1), -1);
});

await check('alignSteps: union of times, values held, null before the first point', () => {
    const [xs, a, b] = alignSteps([[[0, 10], [5, 20]], [[3, 1], [5, 2], [8, 0]]], [10]);
    assert.deepEqual(xs, [0, 3, 5, 8, 10]);
    assert.deepEqual(a, [10, 10, 20, 20, 20]);
    assert.deepEqual(b, [null, 1, 2, 0, 0]);
});

await check('alignSteps: unsorted input, equal times (the later point wins), junk dropped', () => {
    const [xs, a] = alignSteps([[[5, 1], [0, 3], [5, 7], [2, 'x'], null, [NaN, 1]]]);
    assert.deepEqual(xs, [0, 5]);
    assert.deepEqual(a, [3, 7]);
    const [xs2, b] = alignSteps([undefined]);
    assert.deepEqual(xs2, []);
    assert.deepEqual(b, []);
});

await check('microsAxis: one unit per axis, decimals from the step, neighbours distinct', () => {
    assert.deepEqual(microsAxis([0, 200, 400], 200), ['0 µs', '200 µs', '400 µs']);
    assert.deepEqual(microsAxis([0, 500000, 1000000], 500000), ['0.0 s', '0.5 s', '1.0 s']);
    const close = microsAxis([123456.5, 123457, 123457.5], 0.5);
    assert.equal(new Set(close).size, 3, close.join(' | '));
    assert.equal(close[0], '123.4565 ms');
    assert.deepEqual(microsAxis([2000, 4000], 2000), ['2 ms', '4 ms']);
});

await check('niceStep: 1, 2, 5 times a power of ten, at least the raw step', () => {
    assert.equal(niceStep(0.7), 1);
    assert.equal(niceStep(1.5), 2);
    assert.equal(niceStep(3), 5);
    assert.equal(niceStep(7), 10);
    assert.equal(niceStep(2300), 5000);
    assert.equal(niceStep(0), 1);
    assert.ok(Math.abs(niceStep(0.013) - 0.02) < 1e-12);
});

await check('clockAxis: 24-hour local time, seconds only below a minute step', () => {
    const t = new Date(2026, 10, 22, 7, 5, 9).getTime() / 1000;
    assert.deepEqual(clockAxis([t], 60), ['07:05']);
    assert.deepEqual(clockAxis([t], 5), ['07:05:09']);
    assert.deepEqual(clockAxis([null], 5), ['']);
});

await check('axis increments: bytes in powers of two, time never below a second', () => {
    assert.ok(BYTE_INCRS.includes(2 ** 30) && BYTE_INCRS.includes(512 * 2 ** 20));
    assert.equal(Math.min(...CLOCK_INCRS), 1);
});

await check('curves: series sorted by x with nulls for missing keys; latest; time split', () => {
    const pts = [{ step: 20, loss: 1.5 }, { step: 10, loss: 2, accuracy: 0.5 }, { step: 30, loss: 1, test_accuracy: 0.8 }, { loss: 9 }];
    assert.deepEqual(series(pts, 'step', ['loss', 'test_accuracy']), [[10, 20, 30], [2, 1.5, 1], [null, null, 0.8]]);
    assert.deepEqual(series([{ ts: 2000, rate: 1 }], 'ts', ['rate'], 1 / 1000), [[2], [1]]);
    assert.deepEqual(series(null, 'step', ['loss']), [[], []]);
    assert.deepEqual(latest(pts, ['loss', 'accuracy', 'test_accuracy', 'nope']), { loss: 9, accuracy: 0.5, test_accuracy: 0.8 });
    assert.deepEqual(timeSplit({ compute_s: 3, comm_s: 1, data_s: 0 }), [75, 25, 0]);
    assert.equal(timeSplit({}), null);
});

await check('curves: event points become rows, newest first', () => {
    const pts = [{ step: 5, loss: 1 }, { step: 200, event: 'resize', workers: 3, state_from: 'survivor', state_bytes: 1.5e6, resize_s: 0.8 },
        { step: 400, event: 'batch_size', detail: '64 -> 128' }];
    const rows = eventRows(pts);
    assert.equal(rows.length, 2);
    assert.deepEqual(rows[0], [400, 'batch_size', '64 -> 128']);
    assert.equal(rows[1][0], 200);
    assert.match(rows[1][2], /3 workers · state from survivor \(1\.50 MB\) · 0\.80 s after/);
    assert.deepEqual(eventRows(null), []);
});

await check('curves: model selection rows (latest per configuration, best first) and series by epoch', () => {
    const pts = [{ step: 1, epoch: 1, config: 0, test_accuracy: 0.8, params: { 'optimizer.lr': 0.01 } },
        { step: 1, epoch: 1, config: 1, test_accuracy: 0.7 }, { step: 2, epoch: 2, config: 1, test_accuracy: 0.85, test_loss: 0.4, loss: 0.3 },
        { step: 5, loss: 1 }];
    const rows = configRows(pts);
    assert.deepEqual(rows.map((r) => r[0]), [1, 0]);
    assert.deepEqual(rows[0].slice(2), [2, 0.85, 0.4, 0.3]);
    assert.equal(rows[1][1], 'optimizer.lr = 0.01');
    assert.deepEqual(configSeries(pts), [[1, 2], [0.8, null], [0.7, 0.85]]);
    assert.deepEqual(configSeries(null), [[]]);
});

await check('federated: the design as rows of groups', () => {
    assert.deepEqual(designRows({ groups: [[['a', 'b', 'c'], ['d', 'e', 'f']], [['a', 'd', 'g']]] }), [[0, ['{a, b, c}', '{d, e, f}']], [1, ['{a, d, g}']]]);
    assert.deepEqual(designRows(null), []);
});

await check('metrics people read: accuracy as a percentage, loss to 4 digits, latency in ms with 1-2 decimals', () => {
    assert.equal(fmtAccuracy(0.8854), '88.54%');
    assert.equal(fmtAccuracy(0.88539999999999996), '88.54%');
    assert.equal(fmtAccuracy(1), '100.00%');
    assert.equal(fmtLoss(0.48231234567), '0.4823');
    assert.equal(fmtLoss(2.302585092994046), '2.303');
    assert.equal(fmtLoss(1.5), '1.5');
    assert.equal(fmtLoss(0.000123456), '0.0001235');
    assert.equal(fmtLatencyMs(3.2714), '3.27 ms');
    assert.equal(fmtLatencyMs(12.3456), '12.3 ms');
    assert.equal(fmtLatencyMs(1250.54), '1,250.5 ms');
    assert.equal(fmtLatencyMs(0.5), '0.50 ms');
    assert.equal(fmtMetric('test_accuracy', 0.9131), '91.31%');
    assert.equal(fmtMetric('slo_attainment', 0.987654), '98.77%');
    assert.equal(fmtMetric('test_loss', 0.33412345678), '0.3341');
    assert.equal(fmtMetric('p99_ms', 42.123456), '42.1 ms');
    assert.equal(fmtMetric('makespan_us', 12500), '12.5 ms');
    assert.equal(fmtMetric('peak_bytes', 1536), '1.50 KiB');
    assert.equal(fmtMetric('step', 12000), '12,000');
    assert.equal(fmtMetric('epoch', 1.23456), '1.23');
    assert.equal(fmtMetric('epoch', 2), '2');
    assert.equal(fmtMetric('samples_per_s', 120978.4), '120,978');
    assert.equal(fmtMetric('rate', 13.456789), '13.46');
    assert.equal(fmtMetric('loss', null), '—');
    assert.equal(fmtMetric('loss', NaN), '—');
});

await check('busy: overlapping intervals merged, clipped to the window, never above 100%', () => {
    assert.equal(coveredFraction([[0, 60], [30, 90], [10, 20]], 0, 100), 0.9);
    assert.equal(coveredFraction([[-50, 50], [40, 200], [0, 100]], 0, 100), 1);
    assert.equal(coveredFraction([[10, 20], [30, 40]], 0, 100), 0.2);
    assert.equal(coveredFraction([[120, 130]], 0, 100), 0);
    assert.equal(coveredFraction([], 0, 100), 0);
    assert.equal(coveredFraction([[0, 1]], 5, 5), null);
});

await check("a program's curves: against steps or epochs, whichever the lines carry; its own names grouped", () => {
    const epochs = [{ epoch: 1, loss: 0.5, test_accuracy: 0.8, samples_per_s: 900, ts: 1 }, { epoch: 2, loss: 0.4, test_accuracy: 0.85, samples_per_s: 950, ts: 2 }];
    assert.equal(programX(epochs), 'epoch');
    assert.deepEqual(programCharts(epochs).map((c) => [c.id, c.keys]), [['loss', ['loss']], ['accuracy', ['test_accuracy']], ['throughput', ['samples_per_s']]]);
    assert.deepEqual(series(mergeByX(epochs, 'epoch'), 'epoch', ['loss']), [[1, 2], [0.5, 0.4]]);
    const steps = [{ step: 100, loss: 1 }, { step: 200, loss: 0.9, lr: 0.01 }];
    assert.equal(programX(steps), 'step');
    assert.deepEqual(programCharts(steps).map((c) => [c.id, c.keys]), [['loss', ['loss']], ['lr', ['lr']]]);
    // both: the step (on every point here); the epoch is a position, not a curve
    const both = [{ step: 50, epoch: 1, loss: 1, val_loss: 1.2 }, { step: 100, epoch: 2, loss: 0.8, acc: 0.7 }];
    assert.equal(programX(both), 'step');
    assert.deepEqual(programCharts(both).map((c) => [c.id, c.keys]), [['loss', ['loss', 'val_loss']], ['accuracy', ['acc']]]);
    // training lines by step, evaluation lines by epoch only: more points carry the step
    assert.equal(programX([{ step: 1, loss: 1 }, { step: 2, loss: 1 }, { epoch: 1, test_accuracy: 0.5 }]), 'step');
    assert.equal(programX([{ step: 1, loss: 1 }, { epoch: 1, loss: 1 }, { epoch: 2, loss: 1 }]), 'epoch');
    // neither: against time
    assert.equal(programX([{ loss: 1, ts: 5 }]), 'ts');
    // the same x twice (a training line and an evaluation line): one point with both
    assert.deepEqual(series(mergeByX([{ epoch: 1, loss: 0.5 }, { epoch: 1, test_accuracy: 0.9 }], 'epoch'), 'epoch', ['loss', 'test_accuracy']),
        [[1], [0.5], [0.9]]);
    // other ranks' points are not rank 0's curves
    assert.deepEqual(rankZero([{ step: 1, rank: 0 }, { step: 1, rank: 1 }, { step: 2 }]).map((p) => p.step), [1, 2]);
    assert.equal(programCharts([{ step: 1, note: 'text', rank: 0 }]).length, 0);
});

console.log(`ok ${checks} checks`);
