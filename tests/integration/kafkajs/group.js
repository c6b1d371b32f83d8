// group.js BOOTSTRAP TOPIC GROUP - kafkajs 2.2.4 consumer groups against sluiced
// (run by ../kafkajs_group.sh).
//
// Creates TOPIC (6 partitions), produces 300 keyed messages, then:
//   1. two consumers in GROUP (consumer.run, eachMessage, auto-commit) read
//      until together they have every message; once the group settled with
//      the partitions split between them, 120 more are produced and both
//      must read some; each (partition, offset) must arrive exactly once
//      overall and every key must be seen;
//      While split, admin.listGroups/describeGroups (ListGroups, DescribeGroups)
//      must show the group Stable with both members and their assignments,
//      whose partitions (decoded by kafkajs) are the two consumers' shares;
//   2. both disconnect (offsets committed, LeaveGroup); 60 more messages are
//      produced; a new consumer in GROUP must read exactly those 60 (it
//      starts from the committed offsets: admin.fetchOffsets agrees).
'use strict';
const { Kafka, logLevel, AssignerProtocol } = require('kafkajs');

const [bootstrap, topic, groupId] = process.argv.slice(2);
const PARTITIONS = 6;
const FIRST = 300;
const MID = 120;
const SECOND = 60;
const DEADLINE_MS = 50000;

if (!bootstrap || !topic || !groupId) {
  console.error('usage: node group.js BOOTSTRAP TOPIC GROUP');
  process.exit(2);
}
setTimeout(() => {
  console.error(`kafkajs group: FAIL: not done after ${DEADLINE_MS} ms`);
  process.exit(1);
}, DEADLINE_MS).unref();

function check(cond, what) {
  if (!cond) throw new Error(what);
}

function until(cond, ms, what) {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const tick = () => {
      if (cond()) return resolve();
      if (Date.now() - t0 > ms) return reject(new Error(`timeout waiting for ${what}`));
      setTimeout(tick, 50);
    };
    tick();
  });
}

async function produce(kafka, from, n) {
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const messages = [];
  for (let i = from; i < from + n; i++) messages.push({ key: `k${i}`, value: `v${i}` });
  await producer.send({ topic, acks: -1, messages });
  await producer.disconnect();
}

// A group consumer that records "partition offset" and keys into `seen`.
async function startConsumer(kafka, name, seen, keys) {
  const consumer = kafka.consumer({
    groupId, sessionTimeout: 10000, rebalanceTimeout: 10000, heartbeatInterval: 500,
    maxWaitTimeInMs: 100, minBytes: 1,   // long polls, as kafkajs does by default
  });
  const st = { name, consumer, count: 0, assigned: [] };
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    st.assigned = (e.payload.memberAssignment[topic] || []).slice().sort();
    console.log(`${name}: joined generation ${e.payload.groupId} leader=${e.payload.isLeader} ` +
                `partitions [${st.assigned.join(',')}]`);
  });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  await consumer.run({
    autoCommitInterval: 100,
    eachMessage: async ({ partition, message }) => {
      const k = `${partition} ${message.offset}`;
      check(!seen.has(k), `${name}: ${k} delivered twice`);
      seen.add(k);
      keys.add(message.key.toString());
      st.count++;
    },
  });
  return st;
}

// The admin view of the split group: listed, Stable, and each member's assignment
// (kafkajs decodes it) is exactly what one of the consumers was given.
async function checkDescribed(admin, a, b) {
  const { groups: listed } = await admin.listGroups();
  const mine = listed.find((g) => g.groupId === groupId);
  check(mine && mine.protocolType === 'consumer', `listGroups: ${JSON.stringify(listed)}`);
  const { groups } = await admin.describeGroups([groupId]);
  check(groups.length === 1 && groups[0].errorCode === 0 && groups[0].state === 'Stable' &&
        groups[0].protocolType === 'consumer' && groups[0].members.length === 2,
        `describeGroups: ${JSON.stringify(groups)}`);
  const shares = groups[0].members.map((m) => {
    const asg = AssignerProtocol.MemberAssignment.decode(m.memberAssignment);
    check(m.clientId === 'sluice-kjs-group' && m.clientHost.startsWith('/'), `member ${JSON.stringify(m)}`);
    return ((asg && asg.assignment[topic]) || []).slice().sort().join(',');
  }).sort();
  const want = [a.assigned.join(','), b.assigned.join(',')].sort();
  check(JSON.stringify(shares) === JSON.stringify(want), `described shares ${shares} != consumers' ${want}`);
  console.log(`describeGroups: Stable, members' partitions [${shares.join('] [')}]`);
}

async function main() {
  const kafka = new Kafka({
    clientId: 'sluice-kjs-group', brokers: [bootstrap], logLevel: logLevel.WARN,
    connectionTimeout: 5000, retry: { retries: 8, initialRetryTime: 100, maxRetryTime: 1000 },
  });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS }], waitForLeaders: true });
  await produce(kafka, 0, FIRST);

  const seen = new Set();
  const keys = new Set();
  const a = await startConsumer(kafka, 'A', seen, keys);
  const b = await startConsumer(kafka, 'B', seen, keys);
  await until(() => seen.size >= FIRST, 30000, `${FIRST} messages (have ${seen.size})`);
  // Both must end up with a share of the partitions once the group settles.
  await until(() => a.assigned.length > 0 && b.assigned.length > 0 &&
                    a.assigned.length + b.assigned.length === PARTITIONS, 20000,
              `a split of the partitions (A [${a.assigned}], B [${b.assigned}])`);
  // More while the group is split: both consumers must get some.
  await produce(kafka, FIRST, MID);
  await until(() => seen.size >= FIRST + MID, 30000, `${FIRST + MID} messages (have ${seen.size})`);
  await new Promise((r) => setTimeout(r, 300));   // a duplicate would show now
  console.log(`phase 1: A ${a.count}, B ${b.count}, A [${a.assigned}] B [${b.assigned}]`);
  await checkDescribed(admin, a, b);
  check(seen.size === FIRST + MID && keys.size === FIRST + MID, `phase 1: ${seen.size} offsets, ${keys.size} keys`);
  check(a.count > 0 && b.count > 0, `phase 1: A read ${a.count}, B ${b.count}: both should read`);
  await a.consumer.disconnect();
  await b.consumer.disconnect();

  const offs = await admin.fetchOffsets({ groupId, topics: [topic] });
  const committed = offs[0].partitions.reduce((s, p) => s + Number(p.offset), 0);
  check(committed === FIRST + MID, `committed offsets sum to ${committed}, want ${FIRST + MID}: ${JSON.stringify(offs)}`);

  await produce(kafka, FIRST + MID, SECOND);
  const seen2 = new Set();
  const keys2 = new Set();
  const c = await startConsumer(kafka, 'C', seen2, keys2);
  await until(() => seen2.size >= SECOND, 30000, `${SECOND} new messages (have ${seen2.size})`);
  await new Promise((r) => setTimeout(r, 500));   // anything re-read would show now
  check(seen2.size === SECOND, `phase 2: ${seen2.size} messages, want ${SECOND}`);
  for (let i = FIRST + MID; i < FIRST + MID + SECOND; i++) check(keys2.has(`k${i}`), `phase 2: k${i} missing`);
  await c.consumer.disconnect();

  // Offsets set by the admin client (kafkajs joins the group briefly to commit them).
  const simple = `${groupId}-set`;
  await admin.setOffsets({ groupId: simple, topic, partitions: [{ partition: 0, offset: '5' }] });
  const { groups: all } = await admin.listGroups();
  check(all.some((g) => g.groupId === simple), `listGroups after setOffsets: ${JSON.stringify(all)}`);
  const simpleOffs = await admin.fetchOffsets({ groupId: simple, topics: [topic] });
  const p0 = simpleOffs[0].partitions.find((p) => p.partition === 0);
  check(p0 && p0.offset === '5', `setOffsets then fetchOffsets: ${JSON.stringify(simpleOffs)}`);
  const { groups: [dsimple] } = await admin.describeGroups([simple]);
  check(dsimple.state === 'Empty' && dsimple.members.length === 0, `describeGroups(simple): ${JSON.stringify(dsimple)}`);
  await admin.disconnect();
  console.log(`kafkajs group: OK (phase 1 A ${a.count} + B ${b.count}, phase 2 ${c.count})`);
}

main().then(() => process.exit(0), (e) => {
  console.error(`kafkajs group: FAIL: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
