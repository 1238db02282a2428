import * as net from "node:net"

/** A TCP port on 127.0.0.1 that was free a moment ago (listen on 0, read it, close). */
export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = net.createServer()
    s.on("error", reject)
    s.listen(0, "127.0.0.1", () => {
      const a = s.address()
      s.close(() => resolve(typeof a === "object" && a !== null ? a.port : 0))
    })
  })
