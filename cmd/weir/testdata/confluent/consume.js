'use strict';
// node consume.js CONFIG.json TOPIC=FORMAT:COUNT...
//
// Reads weir's output topics (read_committed) from the beginning with
// Confluent's deserializers (FORMAT avro, protobuf or json) until COUNT
// records of each have arrived, and prints each as one JSON line
// {topic, key, value}. Avro decimals and dates print as "12.50" and
// "2026-01-02", timestamp-millis as Unix milliseconds; Protobuf int64 as a
// string, google.protobuf.Timestamp as Unix milliseconds, enums as their
// numbers.
const { clients, avroLogicalTypes, sr } = require('./common.js');

const { registry, kafka } = clients(process.argv[2]);
const want = {};
for (const arg of process.argv.slice(3)) {
  const [topic, spec] = arg.split('=');
  const [format, count] = spec.split(':');
  want[topic] = { count: Number(count), got: 0 };
  const conf = { validate: true };
  if (format === 'avro') want[topic].deser = new sr.AvroDeserializer(registry, sr.SerdeType.VALUE, { logicalTypes: avroLogicalTypes });
  else if (format === 'protobuf') want[topic].deser = new sr.ProtobufDeserializer(registry, sr.SerdeType.VALUE, {});
  else if (format === 'json') want[topic].deser = new sr.JsonDeserializer(registry, sr.SerdeType.VALUE, conf);
  else throw new Error('unknown format ' + format);
}

function plain(_key, v) {
  if (typeof v === 'bigint') return v.toString();
  if (v && typeof v === 'object' && v.$typeName === 'google.protobuf.Timestamp') {
    return Number(v.seconds) * 1000 + Math.floor(v.nanos / 1e6);
  }
  return v;
}
function strip(v) {
  if (Array.isArray(v)) return v.map(strip);
  if (v && typeof v === 'object' && !(v instanceof Buffer)) {
    if (v.$typeName === 'google.protobuf.Timestamp') return v;
    const out = {};
    for (const [k, x] of Object.entries(v)) if (k !== '$typeName' && k !== '$unknown') out[k] = strip(x);
    return out;
  }
  return v;
}

(async () => {
  const consumer = kafka.consumer({ groupId: 'weir-interop-' + process.pid });
  await consumer.connect();
  await consumer.subscribe({ topics: Object.keys(want), fromBeginning: true });
  let done;
  const finished = new Promise((resolve) => (done = resolve));
  const check = () => Object.values(want).every((w) => w.got >= w.count) && done();
  check();
  let failure;
  await consumer.run({
    eachMessage: async ({ topic, message }) => {
      try {
        const value = await want[topic].deser.deserialize(topic, message.value);
        console.log(JSON.stringify({ topic, key: message.key && message.key.toString(), value: strip(value) }, plain));
        want[topic].got++;
        check();
      } catch (e) {
        failure = e;
        done();
      }
    },
  });
  const timer = setTimeout(() => {
    failure = new Error('timed out: ' + JSON.stringify(Object.fromEntries(Object.entries(want).map(([t, w]) => [t, `${w.got} of ${w.count}`]))));
    done();
  }, 60000);
  await finished;
  clearTimeout(timer);
  await consumer.disconnect();
  if (failure) throw failure;
})().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
