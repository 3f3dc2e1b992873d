// Unit test of a search's view (web/search.js) in plain node (no server, no
// browser): each trial's curve from its points, the curves aligned for uPlot,
// the rung decisions' text, the table's sort (best first per mode, trials
// without a value last), how a series is drawn (faded, best).
//   node tests/browser/search.test.mjs
// Prints "ok N checks" or the failing check and exits 1.
import assert from 'node:assert/strict';
import {
    trialCurve, lastReported, alignCurves, rungText, curveJobs, paramNames, sortTrials, defaultDir, seriesLook, fmtParam, isSearch, FADED_ALPHA,
} from '../../web/search.js';

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

await check('a trial\'s curve: points with both the resource and the metric, by resource, the later one at an equal resource', () => {
    const pts = [
        { epoch: 2, test_accuracy: 0.5 },
        { epoch: 1, test_accuracy: 0.3 },
        { epoch: 1, loss: 0.9 },                  // no metric
        { step: 40, test_accuracy: 0.4 },         // no resource
        { epoch: 2, test_accuracy: 0.55 },        // the same epoch again: this one
        { epoch: 3, test_accuracy: 0.6, rank: 1 },// another rank's
    ];
    assert.deepEqual(trialCurve(pts, 'epoch', 'test_accuracy'), [[1, 0.3], [2, 0.55]]);
    assert.deepEqual(trialCurve(undefined, 'epoch', 'test_accuracy'), []);
    assert.deepEqual(lastReported(pts, 'epoch', 'test_accuracy'), { value: 0.55, resource: 2 });
    assert.deepEqual(lastReported([...pts, { test_accuracy: 0.7 }], 'epoch', 'test_accuracy'), { value: 0.7, resource: null });
    assert.equal(lastReported([{ epoch: 1 }], 'epoch', 'test_accuracy'), null);
});

await check('curves aligned over the union of their x, null where a trial has no point', () => {
    assert.deepEqual(alignCurves([[[1, 0.1], [3, 0.3]], [[1, 0.2], [2, 0.25], [9, 0.9]]]),
        [[1, 2, 3, 9], [0.1, null, 0.3, null], [0.2, 0.25, null, 0.9]]);
    assert.deepEqual(alignCurves([]), [[]]);
});

await check('rung decisions read "r0 ✓ r1 ✗", in rung order', () => {
    assert.equal(rungText([{ rung: 1, continued: false }, { rung: 0, continued: true }]), 'r0 ✓ r1 ✗');
    assert.equal(rungText([]), '');
    assert.equal(rungText([{ rung: 1, continued: false }, { rung: 0, continued: true }], true), 'r0 ↑ r1 ⏸');
    assert.deepEqual(curveJobs({ job_id: 'j_2', jobs: ['j_1', 'j_2'] }, true), ['j_1', 'j_2']);
    assert.deepEqual(curveJobs({ job_id: 'j_2', jobs: ['j_1', 'j_2'] }, false), ['j_2']);
    assert.equal(rungText(undefined), '');
});

const trials = [
    { trial: 0, state: 'succeeded', params: { lr: 0.01, width: 32 }, last: { value: 0.8, resource: 9 }, failures: 0, rungs: [{ rung: 0, continued: true }, { rung: 1, continued: true }] },
    { trial: 1, state: 'stopped', params: { lr: 0.001, width: 16 }, last: { value: 0.4, resource: 1 }, failures: 0, rungs: [{ rung: 0, continued: false }] },
    { trial: 2, state: 'running', params: { lr: 0.1, width: 64 }, last: null, failures: 1, rungs: [] },
    { trial: 3, state: 'stopped', params: { lr: 0.0001, width: 64 }, last: { value: 0.8, resource: 3 }, failures: 0, rungs: [{ rung: 0, continued: true }, { rung: 1, continued: false }] },
];
const order = (ts) => ts.map((t) => t.trial);

await check('sorting by the metric: best first per mode, ties by trial number, no value last either way', () => {
    assert.equal(defaultDir('value', 'max'), 'desc');
    assert.equal(defaultDir('value', 'min'), 'asc');
    assert.equal(defaultDir('trial', 'max'), 'asc');
    assert.deepEqual(order(sortTrials(trials, 'value', 'desc')), [0, 3, 1, 2]);
    assert.deepEqual(order(sortTrials(trials, 'value', 'asc')), [1, 0, 3, 2]);
});

await check('sorting by other columns: parameters, state, resource, rungs, failures, trial', () => {
    assert.deepEqual(order(sortTrials(trials, 'param:lr', 'asc')), [3, 1, 0, 2]);
    assert.deepEqual(order(sortTrials(trials, 'param:width', 'desc')), [2, 3, 0, 1]);
    assert.deepEqual(order(sortTrials(trials, 'state', 'asc')), [2, 0, 1, 3]);
    assert.deepEqual(order(sortTrials(trials, 'resource', 'asc')), [1, 3, 0, 2]);
    assert.deepEqual(order(sortTrials(trials, 'rungs', 'desc')), [0, 3, 1, 2]);
    assert.deepEqual(order(sortTrials(trials, 'failures', 'desc')), [2, 0, 1, 3]);
    assert.deepEqual(order(sortTrials(trials, 'trial', 'desc')), [3, 2, 1, 0]);
    // strings and booleans after numbers, strings in natural order
    const mixed = [{ trial: 0, params: { a: 'x10' } }, { trial: 1, params: { a: 'x9' } }, { trial: 2, params: { a: 3 } }, { trial: 3, params: {} }];
    assert.deepEqual(order(sortTrials(mixed, 'param:a', 'asc')), [2, 1, 0, 3]);
    assert.deepEqual(paramNames([...trials, { trial: 4, params: { batch: 3 } }]), ['batch', 'lr', 'width']);
});

await check('series: the best full and thick (even when stopped), stopped, failed and cancelled faded, the rest full', () => {
    assert.ok(FADED_ALPHA < 1);
    assert.deepEqual(seriesLook({ trial: 3, state: 'stopped' }, 3), { alpha: 1, width: 3 });
    for (const state of ['stopped', 'failed', 'cancelled']) assert.equal(seriesLook({ trial: 1, state }, 3).alpha, FADED_ALPHA);
    for (const state of ['running', 'succeeded']) assert.equal(seriesLook({ trial: 1, state }, 3).alpha, 1);
    assert.ok(seriesLook({ trial: 1, state: 'succeeded' }, 3).width < 3);
});

await check('parameters as shown; a search is a program job with a search', () => {
    assert.equal(fmtParam('width', 64), '64');
    assert.equal(fmtParam('lr', 0.000312345), '0.0003123');
    assert.equal(fmtParam('opt', 'adam'), 'adam');
    assert.equal(fmtParam('bn', true), 'true');
    assert.equal(fmtParam('x', undefined), '—');
    assert.equal(isSearch({ program: { command: ['x'] }, search: { space: {} } }), true);
    assert.equal(isSearch({ program: { command: ['x'] }, trial: { search: 'j_1' } }), false);
    assert.equal(isSearch(null), false);
});

console.log(`ok ${checks} checks`);
