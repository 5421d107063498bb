/**
 * The containment backends' names, declared once: `Containment` picks among
 * them without loading `Schema` (`corral run` starts faster), and `Shell`
 * makes them a schema.
 */
export const backends = ["cgroup", "pidns", "procScan"] as const
