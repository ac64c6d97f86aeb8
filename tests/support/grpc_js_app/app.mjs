// An app in another language, as a developer writes one from the broker's .proto: Node
// with @grpc/grpc-js and @grpc/proto-loader (the versions package-lock.json pins).
//
// Usage: node app.mjs BROKER.PROTO SOCKET USERINFO_URL. It asks GetToken on the broker's
// Unix socket, sends the token to the provider's userinfo as every Bearer app does
// (`Authorization: Bearer <token>`), and prints one JSON line: the token's type, the
// status userinfo answered and the `sub` it named. No token is printed.
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';

const [proto, socket, userinfo] = process.argv.slice(2);
const definition = protoLoader.loadSync(proto, { keepCase: true, longs: String, defaults: true });
const { TokenBroker } = grpc.loadPackageDefinition(definition).signin_broker.v1;
const broker = new TokenBroker(`unix:${socket}`, grpc.credentials.createInsecure());

broker.GetToken({}, { deadline: Date.now() + 15000 }, async (error, answer) => {
  broker.close();
  if (error) {
    process.stdout.write(`${JSON.stringify({ error: error.code, message: error.details })}\n`);
    process.exit(1);
  }
  const reply = await fetch(userinfo, { headers: { Authorization: `Bearer ${answer.access_token}` } });
  const claims = reply.ok ? await reply.json() : {};
  process.stdout.write(`${JSON.stringify({ token_type: answer.token_type, status: reply.status, sub: claims.sub ?? null })}\n`);
});
