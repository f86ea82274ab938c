import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/**
 * Addresses a connected agent may not be reached at unless the operator allows it: loopback, private networks,
 * link-local (cloud metadata services), carrier-grade NAT, multicast and reserved ranges. A project token holder
 * configures connections; without this, one could make Waygate call services only it can reach.
 */
const NON_PUBLIC = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) NON_PUBLIC.addSubnet(network, prefix, 'ipv4');
// ::/96 (IPv4-compatible, with :: and ::1), ::ffff:0:0:0/96 (IPv4-translated), 2002::/16 (6to4) and 2001::/32
// (Teredo) carry an IPv4 address inside, which a host with such tunnels would reach.
for (const [network, prefix] of [
  ['::', 96], ['::ffff:0:0:0', 96], ['2002::', 16], ['2001::', 32], ['fc00::', 7], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8], ['64:ff9b::', 96], ['64:ff9b:1::', 48], ['100::', 64], ['2001:db8::', 32],
] as const) {
  NON_PUBLIC.addSubnet(network, prefix, 'ipv6');
}

/** Whether an IP address is not a public one (IPv4-mapped IPv6 addresses are judged by their IPv4 address). */
export function isNonPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  return NON_PUBLIC.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

/** The host of a URL when it is an IP literal that is not public, else null (`[::1]` comes unbracketed). */
export function nonPublicLiteralHost(url: URL): string | null {
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return isNonPublicAddress(host) ? host : null;
}

class NonPublicAddressError extends Error {
  readonly code = 'ERR_NON_PUBLIC_ADDRESS';
  // The address is not named: it would let a caller map the internal network through Waygate's DNS.
  constructor(hostname: string) {
    super(`${hostname} does not resolve to a public address`);
  }
}

/**
 * A DNS lookup for outgoing connections that refuses names resolving to a non-public address. It checks the
 * addresses the connection will use, so a name that resolves differently between a check and the call (DNS
 * rebinding) cannot slip through.
 */
export const publicOnlyLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...(options as LookupOptions), all: true }, (err, addresses: LookupAddress[]) => {
    if (err) return callback(err, '', 0);
    const blocked = addresses.find((a) => isNonPublicAddress(a.address));
    if (blocked) return callback(new NonPublicAddressError(hostname), '', 0);
    if ((options as LookupOptions).all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
    const first = addresses[0]!;
    callback(null, first.address, first.family);
  });
};
