// configs.js BOOTSTRAP PHASE - topic configs that CreateTopics stores and the broker applies
// (run by ../kafkajs_configs.sh).
//
// PHASE "create": topics made with configs: kjc-big (max.message.bytes=2000), kjc-isr
// (min.insync.replicas=2), kjc-seg (segment.bytes=4096), kjc-inert (message.format.version,
// stored, not applied). A batch above max.message.bytes is MESSAGE_TOO_LARGE and one below it
// is appended; acks=all to kjc-isr is NOT_ENOUGH_REPLICAS (one broker: one replica in sync)
// and acks=1 is appended; 40 KB to kjc-seg (the script counts its segment files). Configs
// sluice does not implement are INVALID_CONFIG, and their topic is not made.
// PHASE "after": (after a restart) the same limits still hold.
// PHASE "recreated": (kjc-big deleted and made again without configs) a large batch is taken.
'use strict';
const { Kafka, logLevel, ConfigResourceTypes } = require('kafkajs');

const [bootstrap, phase] = process.argv.slice(2);
const DEADLINE_MS = 150000;

setTimeout(() => {
  console.error(`kafkajs configs: FAIL: not done after ${DEADLINE_MS} ms`);
  process.exit(1);
}, DEADLINE_MS).unref();

function check(cond, what) {
  if (!cond) throw new Error(what);
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

// The error type of one send (the producer does not retry: each answer is seen as it is).
async function sendError(producer, topic, acks, value) {
  try {
    const res = await producer.send({ topic, acks, messages: [{ value }] });
    check(res.length === 1 && res[0].errorCode === 0, `produce to ${topic}: ${JSON.stringify(res)}`);
  } catch (e) {
    let x = e;
    while (x && !x.type && (x.cause || x.originalError)) x = x.cause || x.originalError;
    return (x && x.type) || String(e);
  }
  return 'NONE';
}

async function limits(producer) {
  let e = await sendError(producer, 'kjc-big', -1, 'x'.repeat(5000));
  check(e === 'MESSAGE_TOO_LARGE', `5000 bytes to max.message.bytes=2000: ${e}, want MESSAGE_TOO_LARGE`);
  e = await sendError(producer, 'kjc-big', -1, 'x'.repeat(500));
  check(e === 'NONE', `500 bytes to max.message.bytes=2000: ${e}`);
  e = await sendError(producer, 'kjc-isr', -1, 'v');
  check(e === 'NOT_ENOUGH_REPLICAS', `acks=all to min.insync.replicas=2: ${e}, want NOT_ENOUGH_REPLICAS`);
  e = await sendError(producer, 'kjc-isr', 1, 'v');
  check(e === 'NONE', `acks=1 to min.insync.replicas=2: ${e}`);
}

async function create(admin, producer) {
  const made = (topic, configEntries) => admin.createTopics({ topics: [{ topic, numPartitions: 1, configEntries }] });
  check(await made('kjc-big', [{ name: 'max.message.bytes', value: '2000' }]), 'kjc-big not created');
  check(await made('kjc-isr', [{ name: 'min.insync.replicas', value: '2' }]), 'kjc-isr not created');
  check(await made('kjc-seg', [{ name: 'segment.bytes', value: '4096' }, { name: 'retention.ms', value: '-1' }]),
    'kjc-seg not created');
  check(await made('kjc-inert', [{ name: 'message.format.version', value: '3.0-IV1' },
    { name: 'cleanup.policy', value: 'delete' }, { name: 'compression.type', value: 'producer' }]),
    'kjc-inert not created');
  const refused = [
    [{ name: 'cleanup.policy', value: 'compact' }, 'compaction'],
    [{ name: 'compression.type', value: 'gzip' }, 'a broker-side codec'],
    [{ name: 'message.timestamp.type', value: 'LogAppendTime' }, 'LogAppendTime'],
    [{ name: 'segment.ms', value: '1000' }, 'time-based rolls'],
    [{ name: 'segment.bytes', value: '100' }, 'a segment below 4096 bytes'],
    [{ name: 'message.format.version', value: 'v'.repeat(300) }, 'a 300-byte value'],
    [{ name: 'n'.repeat(20000), value: '1' }, 'a 20000-byte name'],
  ];
  for (const [cfg, what] of refused) {
    const e = await createRefusal(admin, { topic: 'kjc-no', configEntries: [cfg] });
    check(e === 'INVALID_CONFIG', `${what} (${cfg.name}): ${e}, want INVALID_CONFIG`);
  }
  // More configs than one topic takes (DP_TOPIC_CREATE_CONFIGS_MAX, 1000): refused whole.
  const many = [];
  for (let i = 0; i < 1001; i++) many.push({ name: 'retention.ms', value: String(1000 + i) });
  const e = await createRefusal(admin, { topic: 'kjc-no', configEntries: many });
  check(e === 'INVALID_CONFIG', `1001 configs: ${e}, want INVALID_CONFIG`);
  const listed = await admin.listTopics();
  check(!listed.includes('kjc-no'), 'a refused create made its topic');
  await limits(producer);
  for (let i = 0; i < 40; i++) {
    const e = await sendError(producer, 'kjc-seg', -1, 'y'.repeat(1000));
    check(e === 'NONE', `kjc-seg produce ${i}: ${e}`);
  }
}

// DescribeConfigs: what each topic was made with (source 1, DYNAMIC_TOPIC_CONFIG), the broker's
// flags where it sets none (4, STATIC_BROKER_CONFIG), and no key sluice does not implement.
async function describe(admin) {
  const res = await admin.describeConfigs({ includeSynonyms: false, resources: [
    { type: ConfigResourceTypes.TOPIC, name: 'kjc-big' },
    { type: ConfigResourceTypes.TOPIC, name: 'kjc-inert', configNames: ['message.format.version', 'segment.ms'] },
    { type: ConfigResourceTypes.BROKER, name: '1', configNames: ['log.retention.ms', 'num.partitions'] }] });
  check(res.resources.length === 3, `describeConfigs: ${res.resources.length} resources`);
  const [big, inert, broker] = res.resources;
  const entry = (r, n) => r.configEntries.find((e) => e.configName === n);
  check(big.errorCode === 0, `kjc-big: error ${big.errorCode}`);
  let e = entry(big, 'max.message.bytes');
  check(e && e.configValue === '2000' && e.configSource === 1 && !e.isDefault && !e.readOnly,
    `kjc-big max.message.bytes: ${JSON.stringify(e)}`);
  e = entry(big, 'retention.ms');
  check(e && e.configValue === '604800000' && e.configSource === 4 && e.isDefault === false,
    `kjc-big retention.ms (the broker's flag): ${JSON.stringify(e)}`);
  e = entry(big, 'cleanup.policy');
  check(e && e.configValue === 'delete' && e.configSource === 5, `kjc-big cleanup.policy: ${JSON.stringify(e)}`);
  check(!entry(big, 'segment.ms') && !entry(big, 'flush.ms'), 'a config sluice does not implement is listed');
  check(inert.configEntries.length === 1 && inert.configEntries[0].configValue === '3.0-IV1',
    `kjc-inert message.format.version: ${JSON.stringify(inert.configEntries)}`);
  check(broker.errorCode === 0 && broker.configEntries.length === 2 && entry(broker, 'num.partitions').readOnly,
    `broker: ${JSON.stringify(broker)}`);
  let err = 'NONE';
  try {
    await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: 'kjc-none' }] });
  } catch (x) {
    err = x.type || String(x);
  }
  check(err === 'UNKNOWN_TOPIC_OR_PARTITION', `describeConfigs of no topic: ${err}`);
}

// AlterConfigs replaces a topic's configs whole: kjc-big's limit rises to 8000, kjc-isr's
// min.insync.replicas goes (only retention.ms given), so acks=all is taken; validateOnly and a
// refused alter change nothing.
async function alter(admin, producer) {
  const alterOf = (name, configEntries, validateOnly = false) => admin.alterConfigs({ validateOnly,
    resources: [{ type: ConfigResourceTypes.TOPIC, name, configEntries }] });
  await alterOf('kjc-big', [{ name: 'max.message.bytes', value: '100' }], true);
  let e = await sendError(producer, 'kjc-big', -1, 'x'.repeat(500));
  check(e === 'NONE', `after a validateOnly alter, 500 bytes to kjc-big: ${e}`);
  let err = 'NONE';
  try {
    await alterOf('kjc-big', [{ name: 'cleanup.policy', value: 'compact' }]);
  } catch (x) {
    err = x.type || String(x);
  }
  check(err === 'INVALID_CONFIG', `alter to cleanup.policy=compact: ${err}, want INVALID_CONFIG`);
  await alterOf('kjc-big', [{ name: 'max.message.bytes', value: '8000' }]);
  await alterOf('kjc-isr', [{ name: 'retention.ms', value: '3600000' }]);
  await alteredLimits(producer);
  const res = await admin.describeConfigs({ includeSynonyms: false, resources: [
    { type: ConfigResourceTypes.TOPIC, name: 'kjc-isr', configNames: ['min.insync.replicas', 'retention.ms'] }] });
  const entries = res.resources[0].configEntries;
  const get = (n) => entries.find((x) => x.configName === n);
  check(get('min.insync.replicas').configValue === '1' && get('min.insync.replicas').configSource === 5 &&
    get('retention.ms').configValue === '3600000' && get('retention.ms').configSource === 1,
    `kjc-isr after the alter: ${JSON.stringify(entries)}`);
}

async function alteredLimits(producer) {
  let e = await sendError(producer, 'kjc-big', -1, 'x'.repeat(5000));
  check(e === 'NONE', `5000 bytes to max.message.bytes=8000: ${e}`);
  e = await sendError(producer, 'kjc-big', -1, 'x'.repeat(9000));
  check(e === 'MESSAGE_TOO_LARGE', `9000 bytes to max.message.bytes=8000: ${e}, want MESSAGE_TOO_LARGE`);
  e = await sendError(producer, 'kjc-isr', -1, 'v');
  check(e === 'NONE', `acks=all to kjc-isr without min.insync.replicas: ${e}`);
}

// An altered retention.bytes is in effect on the open log: kjc-seg (40 segments of about 1 KB
// each at segment.bytes=4096) keeps at most 4096 bytes once the owner's retention pass runs
// (every 30 s), so its log start moves past 0 without a restart.
async function retain(admin) {
  await admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: 'kjc-seg',
    configEntries: [{ name: 'segment.bytes', value: '4096' }, { name: 'retention.bytes', value: '4096' }] }] });
  const until = Date.now() + 100000;
  for (;;) {
    const offs = await admin.fetchTopicOffsets('kjc-seg');
    if (Number(offs[0].low) > 0) return;
    check(Date.now() < until, `kjc-seg's log start is still ${offs[0].low} 100 s after retention.bytes=4096`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

async function main() {
  const kafka = new Kafka({ clientId: 'sluice-kafkajs-configs', brokers: [bootstrap], logLevel: logLevel.NOTHING,
    retry: { retries: 3 } });
  const admin = kafka.admin();
  await admin.connect();
  const producer = kafka.producer({ allowAutoTopicCreation: false, retry: { retries: 0 } });
  await producer.connect();
  if (phase === 'create') {
    await create(admin, producer);
  } else if (phase === 'after') {
    await limits(producer);
    await describe(admin);
  } else if (phase === 'alter') {
    await alter(admin, producer);
  } else if (phase === 'retain') {
    await retain(admin);
  } else if (phase === 'altered') {
    await alteredLimits(producer);
  } else if (phase === 'recreate') {
    await admin.deleteTopics({ topics: ['kjc-big'] });
    check(await admin.createTopics({ topics: [{ topic: 'kjc-big', numPartitions: 1 }] }), 'kjc-big not made again');
  } else {
    const e = await sendError(producer, 'kjc-big', -1, 'x'.repeat(5000));
    check(e === 'NONE', `5000 bytes to kjc-big made again without configs: ${e}`);
  }
  await producer.disconnect();
  await admin.disconnect();
  console.log(`kafkajs configs ${phase}: OK`);
}

main().then(() => process.exit(0), (e) => {
  console.error(`kafkajs configs ${phase}: FAIL: ${e.stack || e}`);
  process.exit(1);
});
