// The device flow's approved key waits in the database for the CLI's poll (any replica may answer
// it), sealed so that only the holder of the device code can open it: the device code (32 random
// bytes, stored only as a hash) is the seed of an X25519 key pair whose public half is kept with
// the row at start. Approval seals the key to it (ephemeral X25519, HKDF-SHA256, AES-256-GCM);
// the poll, which brings the device code, derives the private half and opens it. The database
// alone, or a reader of it, cannot recover a key that was not yet handed out.
import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createPrivateKey,
  createPublicKey,
  diffieHellman,
  generateKeyPairSync,
  hkdfSync,
  type KeyObject,
  randomBytes,
} from 'node:crypto';

/** PKCS#8 DER of an X25519 private key, up to its 32 raw bytes (RFC 8410). */
const PKCS8_X25519 = Buffer.from('302e020100300506032b656e04220420', 'hex');
const INFO = Buffer.from('svc device key v1');
const VERSION = 'x25519v1';

function privateFromCode(deviceCode: string): KeyObject {
  const seed = createHash('sha256').update('svc device seal\0').update(deviceCode).digest();
  return createPrivateKey({ key: Buffer.concat([PKCS8_X25519, seed]), format: 'der', type: 'pkcs8' });
}

const spki = (k: KeyObject) => (k.export({ format: 'der', type: 'spki' }) as Buffer).toString('base64url');
const publicFrom = (text: string) =>
  createPublicKey({ key: Buffer.from(text, 'base64url'), format: 'der', type: 'spki' });

function aesKey(shared: Buffer, ephemeral: string, recipient: string): Buffer {
  return Buffer.from(hkdfSync('sha256', shared, Buffer.from(`${ephemeral}.${recipient}`), INFO, 32));
}

/** The public key a device code's approval is sealed to (kept with the row at start). */
export function sealKeyOf(deviceCode: string): string {
  return spki(createPublicKey(privateFromCode(deviceCode)));
}

/** `secret` sealed to `recipient` (a sealKeyOf result). */
export function sealTo(recipient: string, secret: string): string {
  const eph = generateKeyPairSync('x25519');
  const ephPub = spki(eph.publicKey);
  const shared = diffieHellman({ privateKey: eph.privateKey, publicKey: publicFrom(recipient) });
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', aesKey(shared, ephPub, recipient), iv);
  const body = Buffer.concat([c.update(secret, 'utf8'), c.final()]);
  return [
    VERSION,
    ephPub,
    iv.toString('base64url'),
    c.getAuthTag().toString('base64url'),
    body.toString('base64url'),
  ].join('.');
}

/** Opens what sealTo sealed to the key of `deviceCode`; null when it does not open. */
export function openWith(deviceCode: string, sealed: string): string | null {
  const [version, ephPub, iv, tag, body] = sealed.split('.');
  if (version !== VERSION || !ephPub || !iv || !tag || body === undefined) return null;
  try {
    const priv = privateFromCode(deviceCode);
    const recipient = spki(createPublicKey(priv));
    const shared = diffieHellman({ privateKey: priv, publicKey: publicFrom(ephPub) });
    const d = createDecipheriv(
      'aes-256-gcm',
      aesKey(shared, ephPub, recipient),
      Buffer.from(iv, 'base64url'),
    );
    d.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([d.update(Buffer.from(body, 'base64url')), d.final()]).toString('utf8');
  } catch {
    return null;
  }
}
