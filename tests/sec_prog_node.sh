#!/bin/sh
# sec_prog_node: Node.js under cagemalloc. Four worker threads build and
# parse JSON, hash, gzip and gunzip buffers, and hand ArrayBuffers back to
# the main thread by transfer (their memory, malloc'ed in a worker, is freed
# by the main thread's isolate), while the main thread does the same work;
# every digest must match the run without cagemalloc.
. "$(dirname "$0")/sec_prog_lib.sh"
need node
cat > "$work/workers.js" <<'EOF'
const { Worker, isMainThread, parentPort, workerData } = require('worker_threads');
const crypto = require('crypto');
const zlib = require('zlib');

function work(seed) {
    const hash = crypto.createHash('sha256');
    const kept = [];
    for (let i = 0; i < 20000; i++) {
        const text = JSON.stringify({ i, seed, s: 'x'.repeat((i * 7 + seed) % 300), a: [i, i * 2, String(i)] });
        kept.push(JSON.parse(text));
        if (kept.length > 500) kept.splice(0, 250);
        hash.update(text);
    }
    const map = new Map();
    for (let i = 0; i < 50000; i++) map.set('k' + ((i * 7919 + seed) % 30011), i);
    for (const [k, v] of map) hash.update(k + v);
    const buf = Buffer.alloc(4 << 20);
    for (let i = 0; i < buf.length; i += 4096) buf.writeUInt32LE((i * 2654435761 + seed) >>> 0, i);
    const packed = zlib.gzipSync(buf);
    hash.update(zlib.gunzipSync(packed));
    const out = new ArrayBuffer(1 << 20);
    new Uint8Array(out).fill(seed + 1);
    return { digest: hash.digest('hex'), packed: packed.length, out };
}

if (isMainThread) {
    const runs = [];
    for (let t = 0; t < 4; t++) {
        runs.push(new Promise((resolve, reject) => {
            const w = new Worker(__filename, { workerData: t });
            w.on('message', resolve);
            w.on('error', reject);
        }));
    }
    const mine = work(9);
    Promise.all(runs).then(results => {
        for (const [t, r] of results.entries()) {
            const bytes = new Uint8Array(r.out);
            const intact = bytes.every(b => b === t + 1);
            console.log(`worker ${t}: ${r.digest} ${r.packed} ${bytes.length} ${intact ? 'intact' : 'CORRUPT'}`);
        }
        console.log(`main: ${mine.digest} ${mine.packed}`);
    });
} else {
    const r = work(workerData);
    parentPort.postMessage(r, [r.out]);
}
EOF
printf 'node %s\n' "$work/workers.js" > "$work/run.sh"
compare workers "$work/run.sh"
grep -q CORRUPT "$work/workers.cage" && { echo "a transferred buffer was corrupted" >&2; exit 1; }
echo "node: four worker threads and the main thread, identical digests under cagemalloc"
