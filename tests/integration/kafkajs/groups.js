// groups.js BOOTSTRAP PHASE - kafkajs 2.2.4's admin deleteGroups against sluiced (run by ../kafkajs_groups.sh).
//
// PHASE "delete": topic kjg (2 partitions, 4 records each). Group kjg-a gets committed offsets
// through admin.setOffsets (no members); group kjg-c consumes once and leaves (Empty, with a
// membership record); group kjg-b keeps a consumer running (Stable). deleteGroups of kjg-a,
// kjg-c, kjg-b and an unknown one: kjg-a and kjg-c are deleted (their offsets read back as -1,
// ListGroups no longer lists them, DescribeGroups says Dead), kjg-b is NON_EMPTY_GROUP with its
// offsets kept, the unknown one GROUP_ID_NOT_FOUND; deleting kjg-a again is GROUP_ID_NOT_FOUND.
// A deleted group takes new commits (setOffsets on kjg-c) and is made anew by them.
// PHASE "after": (after a broker restart) the deletes held: kjg-a has no offsets and is not
// listed; kjg-c has only the offsets committed after its delete; kjg-b's offsets are there.
'use strict';
const { Kafka, logLevel } = require('kafkajs');

const [bootstrap, phase] = process.argv.slice(2);
const TOPIC = 'kjg';
const DEADLINE_MS = 120000;

if (!bootstrap || !phase) {
  console.error('usage: node groups.js BOOTSTRAP delete|after');
  process.exit(2);
}
setTimeout(() => {
  console.error(`kafkajs groups: FAIL: not done after ${DEADLINE_MS} ms`);
  process.exit(1);
}, DEADLINE_MS).unref();

function check(cond, what) {
  if (!cond) throw new Error(what);
}

// Each group's error from one deleteGroups call: { id: 'NONE' | type }.
async function deleteGroups(admin, ids) {
  const out = {};
  for (const id of ids) out[id] = 'NONE';   // kafkajs's error lists only the groups that failed
  try {
    await admin.deleteGroups(ids);
  } catch (e) {
    check(e.groups, `deleteGroups threw ${e}`);
    for (const g of e.groups) out[g.groupId] = g.error ? g.error.type : 'NONE';
  }
  return out;
}

async function offsetsOf(admin, groupId) {
  const res = await admin.fetchOffsets({ groupId, topics: [TOPIC] });
  return res[0].partitions.sort((a, b) => a.partition - b.partition).map((p) => p.offset).join(',');
}

async function listed(admin) {
  return (await admin.listGroups()).groups.map((g) => g.groupId);
}

async function consumeAll(kafka, groupId) {
  const consumer = kafka.consumer({ groupId });
  await consumer.connect();
  await consumer.subscribe({ topic: TOPIC, fromBeginning: true });
  let n = 0;
  await new Promise((resolve) => {
    consumer.run({ autoCommitInterval: 1, eachMessage: async () => { if (++n === 8) resolve(); } });
  });
  await consumer.commitOffsets([{ topic: TOPIC, partition: 0, offset: '4' }, { topic: TOPIC, partition: 1, offset: '4' }]);
  return consumer;
}

async function del(kafka, admin) {
  await admin.createTopics({ topics: [{ topic: TOPIC, numPartitions: 2 }], waitForLeaders: true });
  const producer = kafka.producer();
  await producer.connect();
  for (let p = 0; p < 2; p++) {
    await producer.send({ topic: TOPIC, acks: -1, messages: [0, 1, 2, 3].map((i) => ({ value: `v${i}`, partition: p })) });
  }
  await producer.disconnect();
  await admin.setOffsets({ groupId: 'kjg-a', topic: TOPIC, partitions: [{ partition: 0, offset: '3' }, { partition: 1, offset: '2' }] });
  check(await offsetsOf(admin, 'kjg-a') === '3,2', `kjg-a offsets ${await offsetsOf(admin, 'kjg-a')}`);
  const c = await consumeAll(kafka, 'kjg-c');
  await c.disconnect();
  const b = await consumeAll(kafka, 'kjg-b');
  check(await offsetsOf(admin, 'kjg-c') === '4,4', `kjg-c offsets ${await offsetsOf(admin, 'kjg-c')}`);

  const res = await deleteGroups(admin, ['kjg-a', 'kjg-c', 'kjg-b', 'kjg-none']);
  check(res['kjg-a'] === 'NONE' && res['kjg-c'] === 'NONE', `deleteGroups: ${JSON.stringify(res)}`);
  check(res['kjg-b'] === 'NON_EMPTY_GROUP', `a group with a member: ${res['kjg-b']}, want NON_EMPTY_GROUP`);
  check(res['kjg-none'] === 'GROUP_ID_NOT_FOUND', `an unknown group: ${res['kjg-none']}, want GROUP_ID_NOT_FOUND`);
  const again = await deleteGroups(admin, ['kjg-a']);
  check(again['kjg-a'] === 'GROUP_ID_NOT_FOUND', `deleted twice: ${again['kjg-a']}, want GROUP_ID_NOT_FOUND`);
  check(await offsetsOf(admin, 'kjg-a') === '-1,-1', `kjg-a offsets after its delete: ${await offsetsOf(admin, 'kjg-a')}`);
  check(await offsetsOf(admin, 'kjg-c') === '-1,-1', `kjg-c offsets after its delete: ${await offsetsOf(admin, 'kjg-c')}`);
  check(await offsetsOf(admin, 'kjg-b') === '4,4', `kjg-b offsets: ${await offsetsOf(admin, 'kjg-b')}`);
  const l = await listed(admin);
  check(!l.includes('kjg-a') && !l.includes('kjg-c') && l.includes('kjg-b'), `listed after the deletes: ${l}`);
  const d = await admin.describeGroups(['kjg-a', 'kjg-c']);
  check(d.groups.every((g) => g.state === 'Dead'), `described: ${d.groups.map((g) => g.state)}`);
  await b.disconnect();
  // A deleted group is made anew by new commits.
  await admin.setOffsets({ groupId: 'kjg-c', topic: TOPIC, partitions: [{ partition: 1, offset: '1' }] });
  check(await offsetsOf(admin, 'kjg-c') === '-1,1', `kjg-c offsets after a new commit: ${await offsetsOf(admin, 'kjg-c')}`);
}

async function after(admin) {
  check(await offsetsOf(admin, 'kjg-a') === '-1,-1', `kjg-a offsets after a restart: ${await offsetsOf(admin, 'kjg-a')}`);
  check(await offsetsOf(admin, 'kjg-c') === '-1,1', `kjg-c offsets after a restart: ${await offsetsOf(admin, 'kjg-c')}`);
  check(await offsetsOf(admin, 'kjg-b') === '4,4', `kjg-b offsets after a restart: ${await offsetsOf(admin, 'kjg-b')}`);
  const l = await listed(admin);
  check(!l.includes('kjg-a') && l.includes('kjg-b') && l.includes('kjg-c'), `listed after a restart: ${l}`);
}

(async () => {
  const kafka = new Kafka({ clientId: 'sluice-kafkajs-groups', brokers: [bootstrap], logLevel: logLevel.NOTHING,
    retry: { retries: 8 } });
  const admin = kafka.admin();
  await admin.connect();
  if (phase === 'delete') await del(kafka, admin);
  else await after(admin);
  await admin.disconnect();
  console.log(`kafkajs groups: ${phase} ok`);
  process.exit(0);
})().catch((e) => {
  console.error(`kafkajs groups: FAIL: ${e.stack || e}`);
  process.exit(1);
});
