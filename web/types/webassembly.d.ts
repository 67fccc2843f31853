// WebAssembly JSPI (JavaScript Promise Integration, stack switching), which TypeScript's lib does
// not describe yet: worker.js only asks whether the engine has it.
declare namespace WebAssembly {
  var Suspending: Function | undefined;
}
