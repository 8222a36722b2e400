'use strict';
// node produce.js CONFIG.json INPUT.json
//
// Produces input.json's records into `weir broker` with Confluent's own
// serializers (@confluentinc/schemaregistry), over SASL_SSL:
//   avro-in      Avro: orders, the first minute's with schema v1, the
//                second minute's with v2 (v2 adds note, default "none"),
//                both registered under avro-in-value
//   proto-in     Protobuf: readings as interop.Reading, the second
//                message of its file (message index [1]), registered by
//                the serializer (a base64 FileDescriptorProto)
//   json-in      JSON Schema: payments, validated, with payment.json
//                registered under json-in-value
// and prints the schema ids it used as JSON.
const fs = require('fs');
const path = require('path');
const { create, fromJson, createFileRegistry, createMutableRegistry } = require('@bufbuild/protobuf');
const wkt = require('@bufbuild/protobuf/wkt');
const { clients, avroLogicalTypes, sr } = require('./common.js');

const { registry, kafka } = clients(process.argv[2]);
const input = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
const schema = (f) => fs.readFileSync(path.join(__dirname, f), 'utf8');

// interop/reading.proto, written as its FileDescriptorProto (what protoc
// would generate): Envelope first, so Reading's message index is [1].
const readingFile = fromJson(wkt.FileDescriptorProtoSchema, {
  name: 'interop/reading.proto',
  package: 'interop',
  dependency: ['google/protobuf/timestamp.proto'],
  syntax: 'proto3',
  messageType: [
    { name: 'Envelope', field: [{ name: 'note', number: 1, label: 'LABEL_OPTIONAL', type: 'TYPE_STRING', jsonName: 'note' }] },
    {
      name: 'Reading',
      field: [
        { name: 'sensor', number: 1, label: 'LABEL_OPTIONAL', type: 'TYPE_STRING', jsonName: 'sensor' },
        { name: 'value', number: 2, label: 'LABEL_OPTIONAL', type: 'TYPE_DOUBLE', jsonName: 'value' },
        { name: 'count', number: 3, label: 'LABEL_OPTIONAL', type: 'TYPE_INT64', jsonName: 'count' },
        { name: 'at', number: 4, label: 'LABEL_OPTIONAL', type: 'TYPE_MESSAGE', typeName: '.google.protobuf.Timestamp', jsonName: 'at' },
        { name: 'kind', number: 5, label: 'LABEL_OPTIONAL', type: 'TYPE_ENUM', typeName: '.interop.Kind', jsonName: 'kind' },
        { name: 'tags', number: 6, label: 'LABEL_REPEATED', type: 'TYPE_STRING', jsonName: 'tags' },
      ],
    },
  ],
  enumType: [{ name: 'Kind', value: [{ name: 'KIND_UNSPECIFIED', number: 0 }, { name: 'TEMPERATURE', number: 1 }, { name: 'HUMIDITY', number: 2 }] }],
});
const files = createFileRegistry(readingFile, (name) => (name === 'google/protobuf/timestamp.proto' ? wkt.file_google_protobuf_timestamp : undefined));
const Reading = files.getMessage('interop.Reading');

async function send(producer, topic, messages) {
  await producer.send({ topic, messages, acks: -1 });
}

(async () => {
  const ids = {};
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();

  // Avro: v1 then v2 under one subject (BACKWARD compatible: note has a default).
  ids.avroV1 = await registry.register('avro-in-value', { schemaType: 'AVRO', schema: schema('order-v1.avsc') });
  ids.avroV2 = await registry.register('avro-in-value', { schemaType: 'AVRO', schema: schema('order-v2.avsc') });
  const avroV1 = new sr.AvroSerializer(registry, sr.SerdeType.VALUE, { useSchemaId: ids.avroV1, logicalTypes: avroLogicalTypes });
  const avroV2 = new sr.AvroSerializer(registry, sr.SerdeType.VALUE, { useSchemaId: ids.avroV2, logicalTypes: avroLogicalTypes });
  const orders = [];
  for (const o of input.orders) {
    const { writer, ...rec } = o;
    const ser = writer === 1 ? avroV1 : avroV2;
    orders.push({ key: o.customer, value: await ser.serialize('avro-in', rec) });
  }
  await send(producer, 'avro-in', orders);

  // Protobuf: the serializer registers the file itself.
  const proto = new sr.ProtobufSerializer(registry, sr.SerdeType.VALUE, {
    autoRegisterSchemas: true,
    registry: createMutableRegistry(Reading, files.getEnum('interop.Kind'), files.getMessage('interop.Envelope')),
  });
  const readings = [];
  for (const r of input.readings) {
    const msg = create(Reading, {
      sensor: r.sensor, value: r.value, count: BigInt(r.count), at: wkt.timestampFromMs(r.at),
      kind: files.getEnum('interop.Kind').values.find((v) => v.name === r.kind).number, tags: r.tags,
    });
    readings.push({ key: r.sensor, value: await proto.serialize('proto-in', msg) });
  }
  await send(producer, 'proto-in', readings);
  ids.proto = (await registry.getLatestSchemaMetadata('proto-in-value')).id;

  // JSON Schema, validated on the way out.
  ids.json = await registry.register('json-in-value', { schemaType: 'JSON', schema: schema('payment.json') });
  const json = new sr.JsonSerializer(registry, sr.SerdeType.VALUE, { useLatestVersion: true, validate: true });
  const payments = [];
  for (const p of input.payments) payments.push({ key: p.account, value: await json.serialize('json-in', p) });
  await send(producer, 'json-in', payments);

  await producer.disconnect();
  console.log(JSON.stringify(ids));
})().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
