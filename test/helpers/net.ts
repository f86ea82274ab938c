import net from 'node:net';

/** A loopback port that was free a moment ago (for child processes whose port must be known in advance). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Starts the app on a free loopback port and returns the port (the app's close() stops it). */
export async function listenOnLoopback(app: { listen(options: { port: number; host: string }): Promise<string>; server: net.Server }): Promise<number> {
  await app.listen({ port: 0, host: '127.0.0.1' });
  return (app.server.address() as net.AddressInfo).port;
}
