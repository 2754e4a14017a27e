/** Tests and `vcfleet demo` share one scripted policy server. */
export * from '../../src/demo/scripted-policy-server.ts';
export * from '../../src/demo/scripted-policy-scripts.ts';
