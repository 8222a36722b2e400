'use strict';
// Shared by produce.js and consume.js: Confluent's Schema Registry client
// and a Kafka client (kafkajs, with the snappy codec weir's producers use)
// over SASL_SSL, both configured from the JSON
// file the Go test writes ({brokers, ca, user, password, registry}), and
// the Avro logical types decimal and date for avsc (the library under
// Confluent's AvroSerializer), which it leaves to the application.
const fs = require('fs');
const https = require('https');
const avsc = require('avsc');
const { Kafka, logLevel, CompressionTypes, CompressionCodecs } = require('kafkajs');
const SnappyCodec = require('kafkajs-snappy');
const sr = require('@confluentinc/schemaregistry');

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec;

function clients(cfgFile) {
  const cfg = JSON.parse(fs.readFileSync(cfgFile, 'utf8'));
  const ca = fs.readFileSync(cfg.ca);
  const registry = new sr.SchemaRegistryClient({
    baseURLs: [cfg.registry],
    basicAuthCredentials: { credentialsSource: 'USER_INFO', userInfo: cfg.user + ':' + cfg.password },
    createAxiosDefaults: { httpsAgent: new https.Agent({ ca }) },
  });
  const kafka = new Kafka({
    clientId: 'weir-interop',
    brokers: [cfg.brokers],
    ssl: { ca: [ca] },
    sasl: { mechanism: 'scram-sha-512', username: cfg.user, password: cfg.password },
    logLevel: logLevel.ERROR,
  });
  return { registry, kafka };
}

// Decimal: a string with exactly scale digits after the point ("12.50")
// <-> the big-endian two's complement unscaled integer Avro stores.
class Decimal extends avsc.types.LogicalType {
  constructor(attrs, opts) {
    super(attrs, opts);
    this.scale = attrs.scale || 0;
  }
  _fromValue(buf) {
    let n = 0n;
    for (const b of buf) n = (n << 8n) | BigInt(b);
    if (buf.length > 0 && buf[0] & 0x80) n -= 1n << BigInt(8 * buf.length);
    const neg = n < 0n;
    const digits = (neg ? -n : n).toString().padStart(this.scale + 1, '0');
    const s = this.scale ? digits.slice(0, -this.scale) + '.' + digits.slice(-this.scale) : digits;
    return (neg ? '-' : '') + s;
  }
  _toValue(s) {
    const m = typeof s === 'string' && /^(-?)(\d+)(?:\.(\d*))?$/.exec(s);
    if (!m || (m[3] || '').length > this.scale) return undefined;
    let n = BigInt(m[2] + (m[3] || '').padEnd(this.scale, '0'));
    if (m[1]) n = -n;
    const bytes = [];
    for (;;) {
      bytes.unshift(Number(n & 0xffn));
      n >>= 8n; // arithmetic shift: -1 stays -1
      const sign = bytes[0] & 0x80;
      if ((n === 0n && !sign) || (n === -1n && sign)) break;
    }
    return Buffer.from(bytes);
  }
  _resolve(type) {
    if (avsc.Type.isType(type, 'logical:decimal') && type.scale === this.scale) return (v) => v;
    return undefined;
  }
}

// Date: "2026-01-02" <-> days since 1970-01-01.
class DateOnly extends avsc.types.LogicalType {
  _fromValue(days) {
    return new Date(days * 86400000).toISOString().slice(0, 10);
  }
  _toValue(s) {
    if (typeof s !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(s)) return undefined;
    return Math.round(Date.parse(s + 'T00:00:00Z') / 86400000);
  }
  _resolve(type) {
    if (avsc.Type.isType(type, 'logical:date')) return (v) => v;
    return undefined;
  }
}

const avroLogicalTypes = { decimal: Decimal, date: DateOnly };

module.exports = { clients, avroLogicalTypes, sr };
