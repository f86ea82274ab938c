import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { normalizeText } from '../../src/areas/guardrails/normalize.js';
import {
  CHECKSUM_CATEGORIES,
  PII_CATEGORIES,
  aadhaarValid,
  bech32AddressValid,
  bsnValid,
  btcBase58Valid,
  chineseIdValid,
  codiceFiscaleValid,
  cpfValid,
  dniNieValid,
  ethAddressValid,
  hetuValid,
  ibanValid,
  keccak256,
  looksLikeSecret,
  luhnValid,
  peselValid,
  personnummerValid,
  redactPii,
  scanPii,
  tcknValid,
  type PiiCategory,
} from '../../src/areas/guardrails/pii.js';

/** `[category, matched text]` pairs, in order. */
function found(text: string, enabled?: ReadonlySet<PiiCategory>): Array<[string, string]> {
  const t = normalizeText(text);
  return scanPii(t, enabled).map((s) => [s.category, t.slice(s.start, s.end)]);
}

function categories(text: string): string[] {
  return [...new Set(found(text).map(([c]) => c))];
}

/** Each positive must yield exactly the expected value under the category; each negative nothing of it. */
function cases(category: PiiCategory, positives: Array<[text: string, value: string]>, negatives: string[]): void {
  it.each(positives)(`finds ${category} in %j`, (text, value) => {
    expect(found(text).filter(([c]) => c === category).map(([, v]) => v)).toContain(value);
  });
  it.each(negatives.map((n) => [n]))(`finds no ${category} in %j`, (text) => {
    expect(found(text).filter(([c]) => c === category)).toEqual([]);
  });
}

describe('the category list', () => {
  it('has the 15 categories, checksum ones among them', () => {
    expect(PII_CATEGORIES).toHaveLength(15);
    expect(new Set(PII_CATEGORIES).size).toBe(15);
    for (const c of CHECKSUM_CATEGORIES) expect(PII_CATEGORIES).toContain(c);
    expect([...CHECKSUM_CATEGORIES].sort()).toEqual(['credit_card', 'crypto_wallet', 'iban', 'national_id']);
  });
});

describe('checksums', () => {
  it('Luhn', () => {
    expect(luhnValid('4111111111111111')).toBe(true);
    expect(luhnValid('4111111111111112')).toBe(false);
    expect(luhnValid('378282246310005')).toBe(true);
  });
  it('IBAN mod-97 and country length', () => {
    expect(ibanValid('DE89370400440532013000')).toBe(true);
    expect(ibanValid('GB82WEST12345698765432')).toBe(true);
    expect(ibanValid('DE89370400440532013001')).toBe(false);
    expect(ibanValid('DE8937040044053201300')).toBe(false); // one character short for DE
    expect(ibanValid('XX89370400440532013000')).toBe(false);
  });
  it('national ids', () => {
    expect(tcknValid('10000000146')).toBe(true);
    expect(tcknValid('10000000147')).toBe(false);
    expect(tcknValid('01234567890')).toBe(false);
    expect(cpfValid('52998224725')).toBe(true);
    expect(cpfValid('52998224726')).toBe(false);
    expect(cpfValid('11111111111')).toBe(false);
    expect(dniNieValid('12345678Z')).toBe(true);
    expect(dniNieValid('12345678A')).toBe(false);
    expect(dniNieValid('X1234567L')).toBe(true);
    expect(chineseIdValid('11010519491231002X')).toBe(true);
    expect(chineseIdValid('110105194912310021')).toBe(false);
    expect(hetuValid('131052-308T')).toBe(true);
    expect(hetuValid('131052-308U')).toBe(false);
    expect(personnummerValid('811218-9876')).toBe(true);
    expect(personnummerValid('811218-9875')).toBe(false);
    expect(bsnValid('111222333')).toBe(true);
    expect(bsnValid('111222334')).toBe(false);
    expect(peselValid('44051401359')).toBe(true);
    expect(peselValid('44051401358')).toBe(false);
    expect(aadhaarValid('234123412346')).toBe(true);
    expect(aadhaarValid('234123412347')).toBe(false);
    expect(codiceFiscaleValid('RSSMRA85T10A562S')).toBe(true);
    expect(codiceFiscaleValid('RSSMRA85T10A562T')).toBe(false);
  });
  it('wallets: base58check, bech32/bech32m, EIP-55', () => {
    expect(btcBase58Valid('1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa')).toBe(true);
    expect(btcBase58Valid('3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy')).toBe(true);
    expect(btcBase58Valid('1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNb')).toBe(false);
    expect(bech32AddressValid('bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4')).toBe(true);
    expect(bech32AddressValid('BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4')).toBe(true);
    expect(bech32AddressValid('bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0')).toBe(true);
    expect(bech32AddressValid('bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t5')).toBe(false);
    // A v1 program with a bech32 (not bech32m) checksum is invalid (BIP-350).
    expect(bech32AddressValid('bc1pw508d6qejxtdg4y5r3zarvary0c5xw7kw508d6qejxtdg4y5r3zarvary0c5xw7k7grplx')).toBe(false);
    for (const a of ['0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed', '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359', '0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB']) {
      expect(ethAddressValid(a)).toBe(true);
    }
    expect(ethAddressValid('0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD')).toBe(false);
    expect(ethAddressValid('0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed')).toBe(true); // single case: no checksum
  });
  it('Keccak-256 matches the published vector, and the same permutation gives SHA3-256', () => {
    const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
    expect(hex(keccak256(new Uint8Array()))).toBe('c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470');
    const msg = new TextEncoder().encode('waygate guardrails');
    expect(hex(keccak256(msg, 0x06))).toBe(createHash('sha3-256').update(msg).digest('hex'));
  });
});

describe('categories', () => {
  describe('email', () => {
    cases('email', [['Write to maria.gonzalez@example.com today', 'maria.gonzalez@example.com'], ['<a+tag@sub.example.co.uk>', 'a+tag@sub.example.co.uk']], [
      'npm install lodash@4.17.21', 'logo@2x.png', 'user@localhost', 'git@github.com:org/repo.git', '@Override', 'a@b',
    ]);
  });
  describe('phone', () => {
    cases('phone', [
      ['Call +1 415 555 2671', '+1 415 555 2671'], ['US (415) 555-2671', '(415) 555-2671'], ['415-555-2671', '415-555-2671'],
      ['UK 020 7946 0958', '020 7946 0958'], ['DE 030 12345678', '030 12345678'], ['TR 0532 123 45 67', '0532 123 45 67'],
      ['FR 01 23 45 67 89', '01 23 45 67 89'], ['+905321234567', '+905321234567'], ['tel: 4155552671', '4155552671'],
    ], ['v1.2.3', '10.0.19045.2846', 'on 2024-03-15 10:30', 'Order 4155552671', '123e4567-e89b-12d3-a456-426614174000',
      'ISBN 0-306-40615-2', 'price 1 299 000', 'lottery 04 15 23 42 08 16', '9fceb02d0ae598e95dc970b74767f19372d61af8']);
  });
  describe('credit_card', () => {
    // Groups may be separated by spaces, dashes, en dashes or dots, one kind per number.
    cases('credit_card', [['Visa 4111 1111 1111 1111', '4111 1111 1111 1111'], ['4242-4242-4242-4242', '4242-4242-4242-4242'],
      ['Amex 3782 822463 10005', '3782 822463 10005'], ['5555555555554444', '5555555555554444'],
      ['card 4111.1111.1111.1111.', '4111.1111.1111.1111'], ['card 4242–4242–4242–4242', '4242–4242–4242–4242']],
    ['4111 1111 1111 1112', '1234 5678 9012 3456', '0000 0000 0000 0000', '4111 1111-1111 1111', '41111 1111 1111 111',
      '4111.1111.1111.1112', '4111.1111-1111.1111', 'v4111.1111.1111.1111', '1.4111.1111.1111.1111']);
  });
  describe('iban', () => {
    // Lower-case IBANs (as some people type them) too, but not with mixed case: the country code sets it.
    cases('iban', [['IBAN DE89 3704 0044 0532 0130 00.', 'DE89 3704 0044 0532 0130 00'], ['GB82WEST12345698765432', 'GB82WEST12345698765432'],
      ['iban de89 3704 0044 0532 0130 00', 'de89 3704 0044 0532 0130 00'], ['gb82west12345698765432', 'gb82west12345698765432']],
      ['DE89 3704 0044 0532 0130 01', 'DE89 3704 0044 0532 0130 0', 'GB82WEST12345698765432X', 'de89 3704 0044 0532 0130 01', 'gb82WEST12345698765432', 'GB82west12345698765432']);
  });
  describe('swift_bic', () => {
    cases('swift_bic', [['SWIFT: DEUTDEFF', 'DEUTDEFF'], ['wire via COBADEFFXXX', 'COBADEFFXXX'], ['bank CHASUS33', 'CHASUS33']],
      ['THIS BUSINESS IS CLOSED', 'DEUTDEFF', 'SWIFT: ABCDXX12', 'PASSWORD RESET']);
  });
  describe('us_ssn', () => {
    cases('us_ssn', [['SSN 536-22-8145', '536-22-8145'], ['ssn: 536 22 8145', '536 22 8145']],
      ['000-12-3456', '666-12-3456', '912-34-5678', '123-00-4567', '123-45-0000', '2024-03-15']);
  });
  describe('national_id', () => {
    cases('national_id', [['TCKN 10000000146', '10000000146'], ['CPF 529.982.247-25', '529.982.247-25'], ['DNI 12345678Z', '12345678Z'],
      ['NIE X1234567L', 'X1234567L'], ['id 11010519491231002X', '11010519491231002X'], ['HETU 131052-308T', '131052-308T'],
      ['CF RSSMRA85T10A562S', 'RSSMRA85T10A562S'], ['BSN: 111222333', '111222333'], ['PESEL 44051401359', '44051401359'],
      ['Aadhaar 2341 2341 2346', '2341 2341 2346']],
    ['TCKN 10000000147', 'CPF 529.982.247-26', '12345678A', 'number 111222333', 'order 44051401359', '2341 2341 2346']);
  });
  describe('passport', () => {
    cases('passport', [['Passport No: X12345678', 'X12345678'], ['Pasaport no: U12345678', 'U12345678'], ['Reisepassnummer C01X00T47', 'C01X00T47']],
      ['Ticket X12345678', 'bring your passport', 'Passport renewals take 6 weeks in 2024']);
  });
  describe('date_of_birth', () => {
    cases('date_of_birth', [['DOB: 12.03.1985', '12.03.1985'], ['born on March 3, 1978', 'March 3, 1978'],
      ['Doğum tarihi: 15.06.1988', '15.06.1988'], ['12.05.1979 doğumlu', '12.05.1979'], ['Né le 14 juillet 1989', '14 juillet 1989']],
    ['The meeting is on 12.03.2025', 'Invoice date: 2024-03-15', 'born out of a hackathon in 2019', 'DOB: 31.02.1985']);
  });
  describe('street_address', () => {
    cases('street_address', [['at 221B Baker Street, London NW1 6XE.', '221B Baker Street, London NW1 6XE'],
      ['1600 Pennsylvania Avenue NW, Washington, DC 20500', '1600 Pennsylvania Avenue NW, Washington, DC 20500'],
      ['Hauptstraße 5, 10115 Berlin', 'Hauptstraße 5, 10115 Berlin'], ['Atatürk Caddesi No: 25', 'Atatürk Caddesi No: 25'],
      ['12 rue de la Paix, 75002 Paris', '12 rue de la Paix, 75002 Paris'], ['Calle Mayor 10', 'Calle Mayor 10']],
    ['I walked 5 miles down the road', 'TCP uses a 3 way handshake', 'the top 10 places', 'Chapter 3 The Long Road']);
  });
  describe('ip_address', () => {
    cases('ip_address', [['host 192.168.1.10.', '192.168.1.10'], ['::1', '::1'], ['fe80::1%eth0', 'fe80::1'],
      ['2001:0db8:85a3:0000:0000:8a2e:0370:7334', '2001:0db8:85a3:0000:0000:8a2e:0370:7334'], ['::ffff:192.0.2.128', '::ffff:192.0.2.128']],
    ['v1.2.3', '1.2.3', '10.0.0.0.1', '256.1.1.1', 'version 1.2.3.4', '12:30:45', 'std::vector', '00:1A:2B:3C:4D:5E']);
  });
  describe('url', () => {
    cases('url', [['see https://example.com/a?b=1.', 'https://example.com/a?b=1'], ['(www.example.org/x)', 'www.example.org/x'],
      ['ftp://files.example.net/pub', 'ftp://files.example.net/pub']],
    ['src/areas/pii.ts', 'the http module', 'example.com', 'www.', 'https://twitter.com/jdoe_dev']);
  });
  describe('social_handle', () => {
    cases('social_handle', [['follow @waygate_dev', '@waygate_dev'], ['https://twitter.com/jdoe_dev', 'https://twitter.com/jdoe_dev'],
      ['linkedin.com/in/jane-doe', 'linkedin.com/in/jane-doe'], ['https://www.tiktok.com/@dance.cat', 'https://www.tiktok.com/@dance.cat']],
    ['alice@example.com', '@Override\nvoid f()', ' * @param name', '@media screen', "import '@angular/core'", 'https://github.com/nodejs/node/issues/1']);
  });
  describe('api_key', () => {
    cases('api_key', [['key AKIAIOSFODNN7EXAMPLE', 'AKIAIOSFODNN7EXAMPLE'], ['ghp_abcdefghijklmnopqrstuvwxyzABCDEF123456', 'ghp_abcdefghijklmnopqrstuvwxyzABCDEF123456'],
      ['xoxb-123456789012-abcDEF123456', 'xoxb-123456789012-abcDEF123456'], ['secret=Kz8fQ2mLx9Tb4RwJ7nVc3HpY', 'Kz8fQ2mLx9Tb4RwJ7nVc3HpY'],
      ['-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----', '-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----']],
    ['123e4567-e89b-12d3-a456-426614174000', 'd41d8cd98f00b204e9800998ecf8427e', 'ThisIsAVeryLongCamelCaseIdentifierName',
      'eu-west-1-prod-cluster-02', 'chatcmpl-9aBcD3fGh1JkLmN0pQrStUvWxYz', 'eyJhbGciOiJIUzI1NiJ9.e30', 'sha384-oqVuAfXRKap7fdgcCY5uykM6+R9GqQ8K']);
    it('recognises a JWT only when the header decodes to JSON with "alg"', () => {
      const jwt = `${Buffer.from('{"alg":"HS256"}').toString('base64url')}.${Buffer.from('{"sub":"1"}').toString('base64url')}.c2lnbmF0dXJl`;
      expect(found(`Bearer ${jwt}`)).toEqual([['api_key', jwt]]);
      const notJwt = `${Buffer.from('{"typ":"x"}').toString('base64url')}.e30.c2ln`;
      expect(found(notJwt)).toEqual([]);
    });
    it('scores random tokens and names apart', () => {
      expect(looksLikeSecret('Kz8fQ2mLx9Tb4RwJ7nVc3HpY')).toBe(true);
      expect(looksLikeSecret('getUserAccountSettingsForProject2')).toBe(false);
      expect(looksLikeSecret('abcdefghijklmnopqrstuvwxyz234567')).toBe(false);
    });
  });
  describe('crypto_wallet', () => {
    cases('crypto_wallet', [['BTC 1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa', '1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa'],
      ['to bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4.', 'bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4'],
      ['ETH 0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed', '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed']],
    ['1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNb', '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD',
      '0x5c504ed432cb51138bcf09aa5e8a410dd4a1e204ef84bfed1be16dfba1b22060']);
  });
});

describe('scanPii', () => {
  it('returns nothing for empty text or an empty category set', () => {
    expect(scanPii('')).toEqual([]);
    expect(scanPii('mail a@example.com', new Set())).toEqual([]);
  });

  it('reports only the enabled categories', () => {
    const text = 'Mail jane@example.com or call +1 415 555 2671 from 192.168.1.10';
    expect(categories(text)).toEqual(['email', 'phone', 'ip_address']);
    expect(found(text, new Set(['phone']))).toEqual([['phone', '+1 415 555 2671']]);
    expect(found(text, new Set(['email', 'ip_address'])).map(([c]) => c)).toEqual(['email', 'ip_address']);
  });

  it('keeps the longer of overlapping findings', () => {
    // An email inside a URL: the URL covers it.
    expect(found('https://example.com/invite?to=jane@example.com')).toEqual([['url', 'https://example.com/invite?to=jane@example.com']]);
    // Digits inside an IBAN are not a phone.
    expect(found('IBAN NL00 BANK 0123 4567 89 DE89 3704 0044 0532 0130 00')).toEqual([['iban', 'DE89 3704 0044 0532 0130 00']]);
    // A key inside a URL is still found when URLs are not reported.
    const key = 'sk-proj-Ab3dEf9hIjKlMn0pQrStUvWxYz12345678';
    expect(found(`https://api.example.com/v1?key=${key}`, new Set(['api_key']))).toEqual([['api_key', key]]);
    // A checksum-valid wallet is a wallet, not a generic secret.
    expect(found('0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed')).toEqual([['crypto_wallet', '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed']]);
  });

  it('returns spans sorted by start and within the text', () => {
    const text = 'a@example.com, 4111111111111111, DE89370400440532013000, 10.0.0.1, @jack_dev, https://x.example.org';
    const spans = scanPii(text);
    expect(spans).toHaveLength(6);
    spans.forEach((s, i) => {
      expect(s.start).toBeGreaterThanOrEqual(i === 0 ? 0 : spans[i - 1]!.end);
      expect(s.end).toBeLessThanOrEqual(text.length);
    });
  });

  it('sees through obfuscation once the caller normalises (full-width digits, zero-width characters)', () => {
    expect(categories('４１１１ １１１１ １１１１ １１１１')).toEqual(['credit_card']);
    expect(categories('jane\u200B@example\u200C.com')).toEqual(['email']);
  });

  // Direction marks and isolates, the combining grapheme joiner, the Arabic letter mark, a variation selector, a tag
  // character, a Hangul filler: every default-ignorable code point is invisible, so none may hide a finding.
  const marks = ['\u200E', '\u200F', '\u202A', '\u202E', '\u2066', '\u2069', '\u034F', '\u061C', '\uFE0F', '\u{E0041}', '\u3164'];
  it.each(marks.map((mark) => [mark.codePointAt(0)!.toString(16).toUpperCase(), mark]))('sees through U+%s between every character', (_code, mark) => {
    const hide = (text: string) => [...text].join(mark);
    expect(categories(hide('4111111111111111'))).toEqual(['credit_card']);
    expect(categories(hide('john.doe@example.com'))).toEqual(['email']);
    expect(categories(hide('123-45-6789'))).toEqual(['us_ssn']);
  });
});

describe('redactPii', () => {
  it('replaces each span with [REDACTED:<category>]', () => {
    const text = 'Mail jane@example.com, card 4111 1111 1111 1111, thanks';
    expect(redactPii(text, scanPii(text))).toBe('Mail [REDACTED:email], card [REDACTED:credit_card], thanks');
  });
  it('leaves text without findings unchanged and ignores overlapping or out-of-range spans', () => {
    expect(redactPii('nothing here', [])).toBe('nothing here');
    const spans = [
      { category: 'email', start: 0, end: 5 },
      { category: 'phone', start: 3, end: 8 },
      { category: 'url', start: 20, end: 30 },
    ];
    expect(redactPii('0123456789abc', spans)).toBe('[REDACTED:email]56789abc');
  });
});
