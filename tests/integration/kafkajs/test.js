// test.js BOOTSTRAP TOPIC [COUNT] - kafkajs 2.2.4 against sluiced (run by ../kafkajs.sh).
//
// Creates TOPIC with 6 partitions (Admin CreateTopics), produces COUNT
// (default 20,000) keyed messages with acks -1 in batches of 500, and checks
// what kafkajs itself can check without a consumer group:
//   - every partition result has errorCode 0;
//   - each send's base offset per partition continues exactly where the
//     previous send to that partition ended (offsets are dense and in order);
//   - afterwards ListOffsets (admin.fetchTopicOffsets) reports, per partition,
//     exactly the number of messages kafkajs's partitioner sent there.
// The contents are read back by `rdk_load consume --expect COUNT` (kafkajs.sh):
// kafkajs has no assign(), and consumer.run needs group APIs the broker does
// not serve yet, so no kafkajs fetch is done here.
//
// The value layout must match rdk_load.c: u64 LE i, filler byte j =
// (i * 131 + j) & 0xff, FNV-1a 32 (LE) of everything before it.
'use strict';
const { Kafka, logLevel, Partitioners, CompressionTypes, CompressionCodecs } = require('kafkajs');

const [bootstrap, topic, countArg] = process.argv.slice(2);
const COUNT = Number(countArg || 20000);
const PARTITIONS = 6;
const BATCH = 500;
const SIZE = 100;
const DEADLINE_MS = 180000;
// KJS_IDEMPOTENT=1: idempotent producer (kafkajs.sh then has the broker drop responses).
const IDEMPOTENT = process.env.KJS_IDEMPOTENT === '1';
// KJS_COMPRESSION=gzip|snappy: compress every batch (the broker decompresses and
// checks each one on produce). kafkajs-snappy sends raw snappy, not Xerial.
const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP, snappy: CompressionTypes.Snappy };
const COMPRESSION = CODECS[process.env.KJS_COMPRESSION || 'none'];
if (COMPRESSION === undefined) {
  console.error(`KJS_COMPRESSION=${process.env.KJS_COMPRESSION}: want one of ${Object.keys(CODECS)}`);
  process.exit(2);
}
if (COMPRESSION === CompressionTypes.Snappy) CompressionCodecs[CompressionTypes.Snappy] = require('kafkajs-snappy');

if (!bootstrap || !topic || !(COUNT > 0)) {
  console.error('usage: node test.js BOOTSTRAP TOPIC [COUNT]');
  process.exit(2);
}
setTimeout(() => {
  console.error(`kafkajs test: FAIL: not done after ${DEADLINE_MS} ms`);
  process.exit(1);
}, DEADLINE_MS).unref();

function value(i) {
  const v = Buffer.alloc(SIZE);
  v.writeBigUInt64LE(BigInt(i), 0);
  for (let j = 8; j < SIZE - 4; j++) v[j] = (i * 131 + j) & 0xff;
  let h = 2166136261;
  for (let j = 0; j < SIZE - 4; j++) h = Math.imul(h ^ v[j], 16777619) >>> 0;
  v.writeUInt32LE(h, SIZE - 4);
  return v;
}

function check(cond, what) {
  if (!cond) throw new Error(what);
}

async function main() {
  const kafka = new Kafka({
    clientId: 'sluice-kafkajs-test',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    connectionTimeout: 5000,
    requestTimeout: IDEMPOTENT ? 2000 : 30000,
    retry: { retries: IDEMPOTENT ? 20 : 5, initialRetryTime: 100, maxRetryTime: 2000 },
  });
  const admin = kafka.admin();
  await admin.connect();
  const created = await admin.createTopics({
    topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }],
    waitForLeaders: true,
  });
  console.log(`createTopics: ${created ? 'created' : 'already existed'}`);
  const md = await admin.fetchTopicMetadata({ topics: [topic] });
  check(md.topics.length === 1 && md.topics[0].partitions.length === PARTITIONS,
        `metadata: want 1 topic with ${PARTITIONS} partitions, got ${JSON.stringify(md.topics)}`);
  const partitionMetadata = md.topics[0].partitions;

  // The same partitioner the producer uses, to know where each key lands.
  const partitioner = Partitioners.DefaultPartitioner();
  const producer = kafka.producer({
    allowAutoTopicCreation: false,
    createPartitioner: Partitioners.DefaultPartitioner,
    idempotent: IDEMPOTENT,
    maxInFlightRequests: IDEMPOTENT ? 1 : undefined,
  });
  await producer.connect();
  const next = new Array(PARTITIONS).fill(0); // expected base offset per partition
  const t0 = Date.now();
  for (let start = 0; start < COUNT; start += BATCH) {
    const messages = [];
    const perPart = new Array(PARTITIONS).fill(0);
    for (let i = start; i < Math.min(COUNT, start + BATCH); i++) {
      const m = { key: `k${i}`, value: value(i) };
      perPart[partitioner({ topic, partitionMetadata, message: m })]++;
      messages.push(m);
    }
    const res = await producer.send({ topic, acks: -1, messages, compression: COMPRESSION });
    const seen = new Set();
    for (const r of res) {
      check(r.topicName === topic, `result for topic ${r.topicName}`);
      check(r.errorCode === 0, `partition ${r.partition}: errorCode ${r.errorCode}`);
      const base = Number(r.baseOffset);
      check(base === next[r.partition],
            `partition ${r.partition}: base offset ${base}, want ${next[r.partition]}`);
      next[r.partition] += perPart[r.partition];
      seen.add(r.partition);
    }
    for (let p = 0; p < PARTITIONS; p++)
      check(perPart[p] === 0 || seen.has(p), `no produce result for partition ${p}`);
  }
  const secs = (Date.now() - t0) / 1000;
  console.log(`produced ${COUNT} in ${secs.toFixed(2)} s; per partition ${next.join(' ')}`);
  await producer.disconnect();

  const offs = await admin.fetchTopicOffsets(topic);
  check(offs.length === PARTITIONS, `fetchTopicOffsets: ${offs.length} partitions`);
  for (const o of offs) {
    const have = Number(o.high) - Number(o.low);
    check(Number(o.low) === 0 && have === next[o.partition],
          `partition ${o.partition}: low ${o.low} high ${o.high}, want 0..${next[o.partition]}`);
  }
  await admin.disconnect();
  console.log('kafkajs test: OK');
}

main().then(() => process.exit(0), (e) => {
  console.error(`kafkajs test: FAIL: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
