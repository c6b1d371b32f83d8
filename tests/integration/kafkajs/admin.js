// admin.js BOOTSTRAP PHASE - kafkajs 2.2.4's admin client against sluiced (run by ../kafkajs_admin.sh).
//
// PHASE "grow": creates topic kja with 2 partitions, asks createPartitions for
// 5, and checks that Metadata then lists 5; that a produce to each of the 5
// partitions is acknowledged at offsets 0..3 and a consumer reads every record
// back from each; and that Kafka's refusals come back: a count not above the
// topic's (INVALID_PARTITIONS), an unknown topic (UNKNOWN_TOPIC_OR_PARTITION),
// an assignment naming another broker (INVALID_REPLICA_ASSIGNMENT), and that
// validateOnly changes nothing. Then CreateTopics: an explicit assignment
// (count and factor -1, as kafkajs sends it) creates its partitions, one to
// another broker or with a gap is INVALID_REPLICA_ASSIGNMENT; known configs
// are taken, an unknown key or a bad value is INVALID_CONFIG.
// PHASE "after": (after a broker restart) Metadata still lists 5 partitions and
// the records of the new partitions are still there (ListOffsets latest 4).
'use strict';
const { Kafka, logLevel } = require('kafkajs');

const [bootstrap, phase] = process.argv.slice(2);
const TOPIC = 'kja';
const PER_PART = 4;
const DEADLINE_MS = 120000;
const NODE_ID = 1; // sluiced's default --node-id

if (!bootstrap || !phase) {
  console.error('usage: node admin.js BOOTSTRAP grow|after');
  process.exit(2);
}
setTimeout(() => {
  console.error(`kafkajs admin: FAIL: not done after ${DEADLINE_MS} ms`);
  process.exit(1);
}, DEADLINE_MS).unref();

function check(cond, what) {
  if (!cond) throw new Error(what);
}

async function partitionsOf(admin) {
  const md = await admin.fetchTopicMetadata({ topics: [TOPIC] });
  return md.topics[0].partitions.length;
}

// The error kafkajs reports for one topic of a createPartitions call.
async function refusal(admin, topicPartitions, validateOnly = false) {
  try {
    await admin.createPartitions({ topicPartitions, validateOnly });
  } catch (e) {
    const inner = e.errors && e.errors.length ? e.errors[0] : e;
    return inner.type || e.type || String(e);
  }
  return 'NONE';
}

async function createRefusal(admin, topic) {
  try {
    await admin.createTopics({ topics: [topic] });
  } catch (e) {
    const inner = e.errors && e.errors.length ? e.errors[0] : e;
    return inner.type || e.type || String(e);
  }
  return 'NONE';
}

async function grow(kafka, admin) {
  check(await admin.createTopics({ topics: [{ topic: TOPIC, numPartitions: 2 }], waitForLeaders: true }),
    'createTopics did not create the topic');
  check(await partitionsOf(admin) === 2, 'topic does not start with 2 partitions');
  check(await refusal(admin, [{ topic: TOPIC, count: 4 }], true) === 'NONE', 'validateOnly refused');
  check(await partitionsOf(admin) === 2, 'validateOnly changed the partition count');
  await admin.createPartitions({ topicPartitions: [{ topic: TOPIC, count: 5 }] });
  const n = await partitionsOf(admin);
  check(n === 5, `after createPartitions to 5, Metadata lists ${n}`);
  let e = await refusal(admin, [{ topic: TOPIC, count: 5 }]);
  check(e === 'INVALID_PARTITIONS', `count equal to the topic's: ${e}, want INVALID_PARTITIONS`);
  e = await refusal(admin, [{ topic: TOPIC, count: 3 }]);
  check(e === 'INVALID_PARTITIONS', `count below the topic's: ${e}, want INVALID_PARTITIONS`);
  e = await refusal(admin, [{ topic: 'kja-none', count: 3 }]);
  check(e === 'UNKNOWN_TOPIC_OR_PARTITION', `unknown topic: ${e}, want UNKNOWN_TOPIC_OR_PARTITION`);
  e = await refusal(admin, [{ topic: TOPIC, count: 6, assignments: [[12345]] }]);
  check(e === 'INVALID_REPLICA_ASSIGNMENT', `assignment to another broker: ${e}, want INVALID_REPLICA_ASSIGNMENT`);
  check(await partitionsOf(admin) === 5, 'a refused createPartitions changed the partition count');

  // CreateTopics as kafkajs sends it with an explicit assignment: count and factor -1.
  check(await admin.createTopics({ topics: [{ topic: 'kja-asg', replicaAssignment: [0, 1, 2].map(
    (p) => ({ partition: p, replicas: [NODE_ID] })) }] }), 'createTopics with an assignment created nothing');
  let md = await admin.fetchTopicMetadata({ topics: ['kja-asg'] });
  check(md.topics[0].partitions.length === 3, `assigned topic has ${md.topics[0].partitions.length} partitions, want 3`);
  e = await createRefusal(admin, { topic: 'kja-asg2', replicaAssignment: [{ partition: 0, replicas: [NODE_ID + 1] }] });
  check(e === 'INVALID_REPLICA_ASSIGNMENT', `assignment to another broker: ${e}, want INVALID_REPLICA_ASSIGNMENT`);
  e = await createRefusal(admin, { topic: 'kja-asg2', replicaAssignment: [{ partition: 1, replicas: [NODE_ID] }] });
  check(e === 'INVALID_REPLICA_ASSIGNMENT', `assignment not from partition 0: ${e}, want INVALID_REPLICA_ASSIGNMENT`);
  // Configs: known keys with valid values are taken; an unknown key or a bad value is INVALID_CONFIG.
  check(await admin.createTopics({ topics: [{ topic: 'kja-cfg', numPartitions: 1, configEntries: [
    { name: 'retention.ms', value: '3600000' }, { name: 'cleanup.policy', value: 'delete' },
    { name: 'segment.bytes', value: '1048576' }, { name: 'max.message.bytes', value: '100000' },
    { name: 'min.insync.replicas', value: '1' }, { name: 'retention.bytes', value: '-1' }] }] }),
    'createTopics with configs created nothing');
  e = await createRefusal(admin, { topic: 'kja-cfg2', configEntries: [{ name: 'no.such.config', value: '1' }] });
  check(e === 'INVALID_CONFIG', `unknown config: ${e}, want INVALID_CONFIG`);
  e = await createRefusal(admin, { topic: 'kja-cfg2', configEntries: [{ name: 'retention.ms', value: 'soon' }] });
  check(e === 'INVALID_CONFIG', `bad retention.ms: ${e}, want INVALID_CONFIG`);
  const listed = await admin.listTopics();
  check(!listed.includes('kja-cfg2') && !listed.includes('kja-asg2'), `a refused create made its topic: ${listed}`);

  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  for (let p = 0; p < 5; p++) {
    const msgs = [];
    for (let i = 0; i < PER_PART; i++) msgs.push({ key: `k${p}.${i}`, value: `v${p}.${i}`, partition: p });
    const res = await producer.send({ topic: TOPIC, acks: -1, messages: msgs });
    check(res.length === 1 && res[0].partition === p && res[0].errorCode === 0 && res[0].baseOffset === '0',
      `produce to partition ${p}: ${JSON.stringify(res)}`);
  }
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: 'kja-g' });
  await consumer.connect();
  await consumer.subscribe({ topic: TOPIC, fromBeginning: true });
  const seen = new Map();
  let total = 0;
  await new Promise((resolve, reject) => {
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        const want = `v${partition}.${message.offset}`;
        if (message.value.toString() !== want) reject(new Error(`partition ${partition} offset ${message.offset}: ${message.value}, want ${want}`));
        seen.set(`${partition}.${message.offset}`, true);
        total = seen.size;
        if (total === 5 * PER_PART) resolve();
      },
    }).catch(reject);
  });
  await consumer.disconnect();
  check(total === 5 * PER_PART, `consumed ${total} of ${5 * PER_PART}`);
}

async function after(admin) {
  const n = await partitionsOf(admin);
  check(n === 5, `after the restart, Metadata lists ${n} partitions, want 5`);
  const offs = await admin.fetchTopicOffsets(TOPIC);
  check(offs.length === 5, `ListOffsets: ${offs.length} partitions`);
  for (const o of offs) check(o.high === String(PER_PART), `partition ${o.partition}: high ${o.high}, want ${PER_PART}`);
}

async function main() {
  const kafka = new Kafka({ clientId: 'sluice-kafkajs-admin', brokers: [bootstrap], logLevel: logLevel.NOTHING,
    retry: { retries: 3 } });
  const admin = kafka.admin();
  await admin.connect();
  if (phase === 'grow') await grow(kafka, admin);
  else await after(admin);
  await admin.disconnect();
  console.log(`kafkajs admin ${phase}: OK`);
}

main().then(() => process.exit(0), (e) => {
  console.error(`kafkajs admin ${phase}: FAIL: ${e.stack || e}`);
  process.exit(1);
});
