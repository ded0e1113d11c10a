'use strict';
// The server side of RFC 6455 (WebSocket), by hand, so that the image needs nothing but
// node: the opening handshake, masked client frames, fragmentation, ping/pong and the
// close handshake. The map's rules on top of the RFC's (docs/netcode.md, "Per-connection
// rules"): a message over maxMessage bytes closes with 1009, text that is not UTF-8 with
// 1007, and a client that leaves more than maxBuffered bytes unread is dropped rather
// than queued without end.

const crypto = require('node:crypto');
const { EventEmitter } = require('node:events');
const { isUtf8 } = require('node:buffer');

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
const OP = { cont: 0, text: 1, binary: 2, close: 8, ping: 9, pong: 10 };

// accept completes the upgrade of req on socket, or answers 400 and returns null.
function accept(req, socket, head, opts = {}) {
  const key = req.headers['sec-websocket-key'] || '';
  const upgrade = String(req.headers.upgrade || '').toLowerCase();
  if (req.method !== 'GET' || upgrade !== 'websocket' || req.headers['sec-websocket-version'] !== '13' ||
      Buffer.from(key, 'base64').length !== 16) {
    socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    return null;
  }
  const acceptKey = crypto.createHash('sha1').update(key + GUID).digest('base64');
  socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
    `Sec-WebSocket-Accept: ${acceptKey}\r\n\r\n`);
  return new Conn(socket, head, opts);
}

// Conn is one WebSocket. It emits 'message' (Buffer, isText) and, once, 'close' (code).
class Conn extends EventEmitter {
  constructor(socket, head, { maxMessage = 4096, maxBuffered = 1 << 20 } = {}) {
    super();
    this.socket = socket;
    this.maxMessage = maxMessage;
    this.maxBuffered = maxBuffered;
    this.buf = head && head.length ? Buffer.from(head) : Buffer.alloc(0);
    this.parts = null; // fragments of the message being received
    this.partsText = false;
    this.partsLen = 0;
    this.closing = false; // a close frame was sent
    this.ended = false;
    socket.setNoDelay(true);
    socket.on('data', (d) => { this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d; this.parse(); });
    socket.on('error', () => {});
    socket.on('close', () => this.end());
    if (this.buf.length) setImmediate(() => this.parse());
  }

  sendText(s) { this.frame(OP.text, Buffer.from(s)); }
  sendBinary(b) { this.frame(OP.binary, b); }
  ping() { this.frame(OP.ping, Buffer.alloc(0)); }

  // close starts the close handshake with code; the socket ends when the client answers,
  // or after a second.
  close(code, reason = '') {
    if (this.closing || this.ended) return;
    const r = Buffer.from(reason).subarray(0, 123);
    const p = Buffer.alloc(2 + r.length);
    p.writeUInt16BE(code, 0);
    r.copy(p, 2);
    this.frame(OP.close, p, true);
    this.closing = true;
    this.closeCode = code;
    setTimeout(() => this.socket.destroy(), 1000).unref();
  }

  frame(op, payload, control = false) {
    if (this.ended || (this.closing && !control)) return;
    if (this.socket.writableLength > this.maxBuffered) { // a slow reader is dropped, never queued for ever
      this.socket.destroy();
      return;
    }
    const n = payload.length;
    const head = Buffer.alloc(n < 126 ? 2 : n < 65536 ? 4 : 10);
    head[0] = 0x80 | op;
    if (n < 126) head[1] = n;
    else if (n < 65536) { head[1] = 126; head.writeUInt16BE(n, 2); } else { head[1] = 127; head.writeBigUInt64BE(BigInt(n), 2); }
    this.socket.write(Buffer.concat([head, payload]));
  }

  // fail closes the connection at once for a protocol breach (RFC 6455 section 7.1.7).
  fail(code) {
    this.close(code);
    this.buf = Buffer.alloc(0);
    this.socket.end();
  }

  parse() {
    while (!this.ended) {
      const b = this.buf;
      if (b.length < 2) return;
      const fin = (b[0] & 0x80) !== 0, op = b[0] & 0x0f, masked = (b[1] & 0x80) !== 0;
      let len = b[1] & 0x7f, off = 2;
      if (len === 126) { if (b.length < 4) return; len = b.readUInt16BE(2); off = 4; }
      else if (len === 127) {
        if (b.length < 10) return;
        const big = b.readBigUInt64BE(2);
        if (big > BigInt(this.maxMessage)) return this.fail(1009);
        len = Number(big); off = 10;
      }
      if ((b[0] & 0x70) !== 0 || !masked) return this.fail(1002); // no extensions; clients must mask
      if (op >= 8 && (!fin || len > 125)) return this.fail(1002);
      if (op < 8 && this.partsLen + len > this.maxMessage) return this.fail(1009); // counted as it arrives
      if (b.length < off + 4 + len) return;
      const mask = b.subarray(off, off + 4);
      const data = Buffer.from(b.subarray(off + 4, off + 4 + len));
      for (let i = 0; i < len; i++) data[i] ^= mask[i & 3];
      this.buf = b.subarray(off + 4 + len);
      if (!this.frameIn(fin, op, data)) return;
    }
  }

  // frameIn handles one unmasked frame; false stops parsing.
  frameIn(fin, op, data) {
    switch (op) {
      case OP.ping: this.frame(OP.pong, data); return true;
      case OP.pong: return true;
      case OP.close:
        if (!this.closing) this.close(data.length >= 2 ? data.readUInt16BE(0) : 1000);
        this.socket.end();
        return false;
      case OP.text: case OP.binary:
        if (this.parts) { this.fail(1002); return false; }
        this.parts = []; this.partsText = op === OP.text; this.partsLen = 0;
        break;
      case OP.cont:
        if (!this.parts) { this.fail(1002); return false; }
        break;
      default: this.fail(1002); return false;
    }
    this.parts.push(data);
    this.partsLen += data.length;
    if (!fin) return true;
    const msg = this.parts.length === 1 ? this.parts[0] : Buffer.concat(this.parts);
    const text = this.partsText;
    this.parts = null; this.partsLen = 0;
    if (text && !isUtf8(msg)) { this.fail(1007); return false; }
    if (!this.closing) this.emit('message', msg, text);
    return true;
  }

  end() {
    if (this.ended) return;
    this.ended = true;
    this.socket.destroy();
    this.emit('close', this.closeCode || 1006);
  }
}

module.exports = { accept, Conn };
