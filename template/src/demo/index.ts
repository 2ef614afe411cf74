// The demo peers of `npm start` (a model and a product, under /demo): see routes.ts.
export { DEMO_MODEL_NAME, demoCompletion, flaggedWords, resultPortsOf } from "./model";
export { productPage } from "./page";
export { listReceived, receive, registerSecret, type Received } from "./product";
