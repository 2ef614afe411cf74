// Onboarding domain: the first-run checklist computed from the installation's own state.
export { ONBOARDING_STEPS, onboardingChecklist, type OnboardingStep } from "./checklist";
