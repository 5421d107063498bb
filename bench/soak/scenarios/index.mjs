// The fault matrix, in the order it is run and printed; each scenario runs on
// every containment backend the machine offers. Each scenario is
// { id, summary, orphans, timeoutMs?, run(ctx) }: `run` is one iteration, an
// Effect that fails with SoakFailure when the kernel or corral breaks an
// expectation. ctx holds the backend, a state directory and token(), a
// marker to put in what the scenario starts (see runner.mjs). `orphans`
// marks scenarios whose groups have members outliving their parents: outside a PID namespace those would stay zombies of the
// machine's PID 1, so they run only inside one.
import badInputs from "./bad-inputs.mjs"
import corralRunSigkill from "./corral-run-sigkill.mjs"
import escaper from "./escaper.mjs"
import forker from "./forker.mjs"
import hopper from "./hopper.mjs"
import interruptedStop from "./interrupted-stop.mjs"
import invalidUtf8 from "./invalid-utf8.mjs"
import jobControl from "./job-control.mjs"
import nestedCorral from "./nested-corral.mjs"
import obedient from "./obedient.mjs"
import outDescriptors from "./out-of-descriptors.mjs"
import outputFlood from "./output-flood.mjs"
import pipeHolder from "./pipe-holder.mjs"
import setsidEscaper from "./setsid-escaper.mjs"
import shellCap from "./shell-cap.mjs"
import stoppedMember from "./stopped-member.mjs"
import stubborn from "./stubborn.mjs"
import supervisorKill from "./supervisor-kill.mjs"
import zombieMembers from "./zombie-members.mjs"

export const scenarios = [
  obedient,
  stubborn,
  forker,
  zombieMembers,
  jobControl,
  stoppedMember,
  pipeHolder,
  setsidEscaper,
  supervisorKill,
  escaper,
  hopper,
  nestedCorral,
  interruptedStop,
  corralRunSigkill,
  outDescriptors,
  outputFlood,
  invalidUtf8,
  shellCap,
  badInputs
]
