// Deterministic operator graphs for the browser tests (no randomness between
// runs: a small linear congruential generator seeded by the caller).

// A layered DAG: `layers` layers of `width` ops; every op after the first
// layer reads the outputs of 1-3 ops of the layer before. Each op holds
// persistentBytes of weights and produces outputBytes, so a plan that spreads
// layers over devices has to move tensors between them.
export function layeredGraph({
    layers = 50, width = 40, devices = 4, deviceBytes = 2 * 1024 ** 3,
    persistentBytes = 2 * 1024 ** 2, outputBytes = 1024 ** 2, seed = 7,
} = {}) {
    let s = seed >>> 0;
    const rnd = () => { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; return s / 2 ** 32; };
    const name = (l, i) => `l${l}/op${i}`;
    const ops = [], edges = [];
    for (let l = 0; l < layers; l++) {
        for (let i = 0; i < width; i++) {
            ops.push({
                name: name(l, i),
                compute_us: Math.round(20 + rnd() * 60),
                persistent_bytes: persistentBytes,
                output_bytes: [outputBytes],
            });
            if (l === 0) continue;
            const k = 1 + Math.floor(rnd() * 3);
            const from = new Set();
            for (let j = 0; j < k; j++) from.add(Math.floor(rnd() * width));
            for (const p of from) edges.push({ src: name(l - 1, p), dst: name(l, i), bytes: outputBytes });
        }
    }
    return {
        ops, edges,
        devices: Array.from({ length: devices }, (_, d) => ({ name: `gpu${d}`, memory_bytes: deviceBytes })),
        comm: { latency_us: 20, bytes_per_us: 5000 },
    };
}
